package initcopy

import (
	"slices"
	"testing"

	"github.com/rs/zerolog"
)

// TestProgressCounts: a transcript of a copy's events and the snapshot
// after each: the rows counted while streaming give way to the target's
// count at commit, a whole table leaves Copying when its copy ends, a
// table copied in ranges stays there between its ranges until it is
// done, and every snapshot is told once.
func TestProgressCounts(t *testing.T) {
	a := &Table{Rel: Rel{Schema: "s", Name: "a"}, estRows: 100}
	b := &Table{Rel: Rel{Schema: "s", Name: "b"}, estRows: 300}
	var told []Snapshot
	p := NewProgress(3, 1, []*Table{a, b}, func(s Snapshot) { told = append(told, s) }, zerolog.Nop(), 0)
	copying := func(s Snapshot) []TableCount { return s.Copying }

	ac, aEnded := p.copying(a)
	p.add(ac, 1000, 40)
	b1, b1Ended := p.copyingRange(b)
	p.addRanges(2)
	p.add(b1, 500, 20)
	s := p.Snapshot(false)
	if want := []TableCount{{"s.a", 40, 1000}, {"s.b", 20, 500}}; !slices.Equal(copying(s), want) {
		t.Errorf("two copies running: Copying %v, want %v", copying(s), want)
	}
	if s.Rows != 60 || s.Bytes != 1500 || s.EstimatedRows != 400 || s.TablesDone != 1 || s.TablesTotal != 3 || s.RangesTotal != 2 {
		t.Errorf("two copies running: %+v", s)
	}

	// a commits: the target took 41 rows (a binary trailer counted
	// short), and a leaves Copying.
	p.tableDone(a, 41, 40)
	aEnded()
	if last := told[len(told)-1]; last.Table != `"s"."a"` || last.TableRows != 41 || last.TablesDone != 2 || last.Rows != 61 {
		t.Errorf("after a's commit: told %+v", last)
	}
	// b's first range commits and ends: b stays, with its count.
	p.rangeDone(20, 20)
	b1Ended()
	if got := copying(p.Snapshot(false)); !slices.Equal(got, []TableCount{{"s.b", 20, 500}}) {
		t.Errorf("between b's ranges: Copying %v, want b kept", got)
	}
	b2, b2Ended := p.copyingRange(b)
	if b2 != b1 {
		t.Error("b's second range counts apart from its first")
	}
	p.add(b2, 700, 30)
	p.rangeDone(30, 30)
	p.tableDone(b, 50, 50)
	b2Ended()
	s = p.Snapshot(true)
	if len(s.Copying) != 0 || s.TablesDone != 3 || s.RangesDone != 2 || s.Rows != 91 || s.Bytes != 2200 || !s.Done || s.ETA != 0 {
		t.Errorf("done: %+v", s)
	}
	if len(told) != 4 { // a's table, b's two ranges, b's table
		t.Errorf("told %d snapshots, want 4", len(told))
	}
}

// TestProgressNobodyListens: without a listener nothing is told, and the
// counts still add up.
func TestProgressNobodyListens(t *testing.T) {
	a := &Table{Rel: Rel{Schema: "s", Name: "a"}}
	p := NewProgress(1, 0, []*Table{a}, nil, zerolog.Nop(), 0)
	c, ended := p.copying(a)
	p.add(c, 10, 1)
	p.tableDone(a, 1, 1)
	ended()
	if s := p.Snapshot(true); s.Rows != 1 || s.TablesDone != 1 || s.EstimatedRows != 0 || s.ETA != 0 {
		t.Errorf("%+v", s)
	}
}

// TestDoneStatus: a copy commits its tables done unless told to commit
// them copied (a table copied while the stream goes on).
func TestDoneStatus(t *testing.T) {
	if got := (&Copier{}).doneStatus(); got != StatusDone {
		t.Errorf("default: %q", got)
	}
	if got := (&Copier{DoneAs: StatusCopied}).doneStatus(); got != StatusCopied {
		t.Errorf("copied: %q", got)
	}
}

// TestMayFreeze: only a table this attempt's pre-data created, and not a
// partitioned one, is truncated for COPY FREEZE.
func TestMayFreeze(t *testing.T) {
	made := &Table{Rel: Rel{Schema: "s", Name: "made"}}
	mine := &Table{Rel: Rel{Schema: "s", Name: "mine"}}
	parts := &Table{Rel: Rel{Schema: "s", Name: "parts"}, targetPartitioned: true}
	c := &Copier{Created: map[Rel]bool{made.Rel: true, parts.Rel: true}}
	for _, tc := range []struct {
		t    *Table
		want bool
	}{{made, true}, {mine, false}, {parts, false}} {
		if got := c.mayFreeze(tc.t); got != tc.want {
			t.Errorf("%s: mayFreeze = %v, want %v", tc.t, got, tc.want)
		}
	}
	if (&Copier{}).mayFreeze(made) {
		t.Error("a resumed copy (nothing created) froze a table")
	}
}
