package engine

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/protocol"
)

func TestParseSnapshot(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want CopySnapshot
		err  string
	}{
		{in: "10:20:", want: CopySnapshot{xmin: 10, xmax: 20}},
		{in: "10:20:15,11,19", want: CopySnapshot{xmin: 10, xmax: 20, xip: []uint64{11, 15, 19}}},
		{in: "4294967300:4294967310:4294967301", want: CopySnapshot{xmin: 4294967300, xmax: 4294967310, xip: []uint64{4294967301}}},
		{in: "10:20", err: "want xmin:xmax:xip-list"},
		{in: "x:20:", err: "xmin"},
		{in: "10:y:", err: "xmax"},
		// xmax below xmin: a slot's exported snapshot after aborts
		// (see CopySnapshot); it lists no xid.
		{in: "2863:2862:", want: CopySnapshot{xmin: 2863, xmax: 2862}},
		{in: "20:10:", want: CopySnapshot{xmin: 20, xmax: 10}},
		{in: "4294967300:4294967290:", want: CopySnapshot{xmin: 4294967300, xmax: 4294967290}},
		{in: "2863:2862:2862", err: "outside"},
		{in: "20:10:15", err: "outside"},
		{in: "10:20:9", err: "outside"},
		{in: "10:20:20", err: "outside"},
		{in: "10:20:1a", err: "xip"},
	} {
		got, err := ParseSnapshot(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseSnapshot(%q) error = %v, want one containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got.xmin != tc.want.xmin || got.xmax != tc.want.xmax || !slices.Equal(got.xip, tc.want.xip) {
			t.Errorf("ParseSnapshot(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestWidenXid(t *testing.T) {
	const epoch = uint64(1) << 32
	for _, tc := range []struct {
		xid  uint32
		ref  uint64
		want uint64
	}{
		{xid: 100, ref: 200, want: 100},
		{xid: 300, ref: 200, want: 300},
		{xid: 5, ref: 3, want: 5},
		{xid: math.MaxUint32 - 5, ref: 3, want: math.MaxUint32 - 5}, // no epoch before the first
		{xid: 10, ref: 2*epoch + 5, want: 2*epoch + 10},
		{xid: math.MaxUint32 - 10, ref: 2*epoch + 5, want: 2*epoch - 11}, // just before the wrap
		{xid: 20, ref: 2*epoch - 5, want: 2*epoch + 20},                  // just after it
		{xid: 1 << 31, ref: epoch, want: epoch + 1<<31 - 1<<32},
	} {
		if got := widenXid(tc.xid, tc.ref); got != tc.want {
			t.Errorf("widenXid(%d, %d) = %d, want %d", tc.xid, tc.ref, got, tc.want)
		}
	}
}

func TestSnapshotVisible(t *testing.T) {
	const epoch = uint64(1) << 32
	s := CopySnapshot{xmin: epoch + 100, xmax: epoch + 110, xip: []uint64{epoch + 100, epoch + 105}}
	for xid, want := range map[uint32]bool{
		50:  true,  // finished before xmin
		99:  true,  // idem
		100: false, // in progress
		101: true,  // committed between xmin and xmax
		105: false, // in progress
		109: true,
		110: false, // started after the snapshot
		500: false,
	} {
		if got := s.Visible(xid); got != want {
			t.Errorf("visible(%d) = %v, want %v", xid, got, want)
		}
	}
}

// filterRels is a relation cache with relations 1 (public.a), 2
// (public.b) and 3 (s.c), for the filter's tests.
func filterRels() *relmap.Cache {
	rels := relmap.NewCache(false)
	for i, n := range []sqlgen.Rel{{Schema: "public", Name: "a"}, {Schema: "public", Name: "b"}, {Schema: "s", Name: "c"}} {
		rels.PutRelation(&protocol.Relation{RelationID: uint32(i + 1), Namespace: n.Schema, Name: n.Name})
	}
	return rels
}

func TestCopyFilter(t *testing.T) {
	snap, err := ParseSnapshot("100:120:100,115")
	if err != nil {
		t.Fatal(err)
	}
	// public.b was copied in the snapshot at 0/5000, s.c at 0/6000 in
	// the same snapshot; public.a is not filtered.
	f := NewCopyFilter()
	f.Add(sqlgen.Rel{Schema: "public", Name: "b"}, &CopiedTable{LSN: 0x5000, Snap: snap})
	f.Add(sqlgen.Rel{Schema: "s", Name: "c"}, &CopiedTable{LSN: 0x6000, Snap: snap})
	if f.Until() != 0x6000 || f.Len() != 2 {
		t.Fatalf("filter until %s over %d tables, want 0/6000 over 2", f.Until(), f.Len())
	}
	rels := filterRels()
	var xid uint32
	var final protocol.LSN
	ins := func(rel uint32) protocol.Message { return &protocol.Insert{RelationID: rel} }
	for _, tc := range []struct {
		name  string
		xid   uint32
		final protocol.LSN
		msg   protocol.Message
		kept  bool
	}{
		{"other table", 101, 0x4000, ins(1), true},
		{"visible, before the copy point", 101, 0x4000, ins(2), false},
		{"update, visible", 101, 0x4000, &protocol.Update{RelationID: 2}, false},
		{"delete, visible", 101, 0x4000, &protocol.Delete{RelationID: 3}, false},
		{"at the copy point", 101, 0x5000, ins(2), true},
		{"after the copy point", 101, 0x5001, ins(2), true},
		{"past every copy point", 101, 0x6000, ins(3), true},
		{"before the point of one, after the other", 101, 0x5500, ins(3), false},
		// A transaction prepared before the copy point and committed
		// after it (in progress in the snapshot): its changes are not in
		// the copy.
		{"in progress in the snapshot", 115, 0x4000, ins(2), true},
		{"started after the snapshot", 130, 0x4000, ins(2), true},
		{"finished before the snapshot", 90, 0x4000, ins(2), false},
		{"unknown relation", 101, 0x4000, ins(9), true},
		{"logical message", 101, 0x4000, &protocol.LogicalMessage{}, true},
	} {
		xid, final = tc.xid, tc.final
		got := f.Filter(rels, xid, final, tc.msg)
		if kept := got != nil; kept != tc.kept || (kept && got != tc.msg) {
			t.Errorf("%s: filter returned %v, want kept=%v (the same message)", tc.name, got, tc.kept)
		}
	}

	// TRUNCATE of several tables keeps the tables whose copies do not
	// hold it.
	xid, final = 101, 0x4000
	tr := &protocol.Truncate{Options: protocol.TruncateCascade, RelationIDs: []uint32{1, 2, 3}}
	got, ok := f.Filter(rels, xid, final, tr).(*protocol.Truncate)
	if !ok || !slices.Equal(got.RelationIDs, []uint32{1}) || got.Options != protocol.TruncateCascade {
		t.Errorf("filtered TRUNCATE = %+v, want relations [1] with CASCADE", got)
	}
	if !slices.Equal(tr.RelationIDs, []uint32{1, 2, 3}) {
		t.Errorf("the filter changed the message it was given: %v", tr.RelationIDs)
	}
	if got := f.Filter(rels, xid, final, &protocol.Truncate{RelationIDs: []uint32{2, 3}}); got != nil {
		t.Errorf("TRUNCATE of filtered tables only = %+v, want nil", got)
	}
	if got := f.Filter(rels, xid, final, tr); got == tr {
		t.Error("TRUNCATE with a filtered table came back unchanged")
	}
	final = 0x7000
	if got := f.Filter(rels, xid, final, tr); got != tr {
		t.Errorf("TRUNCATE after every copy point = %+v, want the message itself", got)
	}

	var nilFilter *CopyFilter
	xid, final = 101, 0x10
	if m := ins(2); nilFilter.Filter(rels, xid, final, m) != m {
		t.Error("a nil filter dropped a change")
	}
}

// pgVisible is PostgreSQL's rule for a snapshot (XidInMVCCSnapshot,
// pg_visible_in_snapshot), on full xids: below xmin finished, from xmax on
// not started, in between running when listed.
func pgVisible(s CopySnapshot, x uint64) bool {
	if x < s.xmin {
		return true
	}
	if x >= s.xmax {
		return false
	}
	return !slices.Contains(s.xip, x)
}

// TestSnapshotVisibleExported checks visible on snapshots of the forms
// PostgreSQL exports, xmax below xmin among them, against PostgreSQL's
// rule for every xid around them.
func TestSnapshotVisibleExported(t *testing.T) {
	const epoch = uint64(1) << 32
	for _, tc := range []struct {
		in      string
		visible []uint64 // xids visible among [lo, hi)
		lo, hi  uint64
	}{
		// The snapshot: 2862 finished (below xmin), 2863 on running.
		{in: "2863:2862:", lo: 2855, hi: 2870, visible: []uint64{2855, 2856, 2857, 2858, 2859, 2860, 2861, 2862}},
		// Several aborted xids between xmax and xmin.
		{in: "105:101:", lo: 98, hi: 110, visible: []uint64{98, 99, 100, 101, 102, 103, 104}},
		// No transaction ran at the consistent point.
		{in: "100:100:", lo: 95, hi: 105, visible: []uint64{95, 96, 97, 98, 99}},
		// The ordinary form: running xids listed, the rest committed.
		{in: "100:105:100,102", lo: 98, hi: 108, visible: []uint64{98, 99, 101, 103, 104}},
		// Across an epoch boundary, xmax below xmin.
		{in: "4294967298:4294967295:", lo: epoch - 3, hi: epoch + 5, visible: []uint64{epoch - 3, epoch - 2, epoch - 1, epoch, epoch + 1}},
	} {
		s, err := ParseSnapshot(tc.in)
		if err != nil {
			t.Errorf("ParseSnapshot(%q): %v", tc.in, err)
			continue
		}
		for x := tc.lo; x < tc.hi; x++ {
			want := slices.Contains(tc.visible, x)
			if pg := pgVisible(s, x); pg != want {
				t.Fatalf("%s: the test's table says %d visible=%v, PostgreSQL's rule %v", tc.in, x, want, pg)
			}
			if got := s.Visible(uint32(x)); got != want {
				t.Errorf("%s: visible(%d) = %v, want %v", tc.in, x, got, want)
			}
		}
	}
}

// FuzzSnapshotVisible builds snapshots of every form PostgreSQL exports
// (xmax on either side of xmin, running xids in [xmin, xmax)), writes them
// as pg_snapshot text and checks that parseSnapshot accepts them and that
// visible follows PostgreSQL's rule for the xids around them.
func FuzzSnapshotVisible(f *testing.F) {
	f.Add(uint64(2863), int16(-1), uint64(0))
	f.Add(uint64(100), int16(5), uint64(0b10101))
	f.Add(uint64(1)<<32-2, int16(4), uint64(0b11))
	f.Add(uint64(3), int16(0), uint64(0))
	f.Fuzz(func(t *testing.T, xmin uint64, delta int16, mask uint64) {
		xmin = 3 + xmin%(1<<40) // a normal full xid
		d := int64(delta % 64)
		if d < -int64(xmin-3) {
			d = -int64(xmin - 3)
		}
		s := CopySnapshot{xmin: xmin, xmax: uint64(int64(xmin) + d)}
		var xip []string
		for x := s.xmin; x < s.xmax; x++ {
			if mask&(1<<(x-s.xmin)) != 0 {
				s.xip = append(s.xip, x)
				xip = append(xip, strconv.FormatUint(x, 10))
			}
		}
		text := fmt.Sprintf("%d:%d:%s", s.xmin, s.xmax, strings.Join(xip, ","))
		got, err := ParseSnapshot(text)
		if err != nil {
			t.Fatalf("ParseSnapshot(%q): %v", text, err)
		}
		lo, hi := min(s.xmin, s.xmax), max(s.xmin, s.xmax)
		for x := lo - min(lo, 3); x < hi+3; x++ {
			if v, want := got.Visible(uint32(x)), pgVisible(s, x); v != want {
				t.Fatalf("%s: visible(%d) = %v, PostgreSQL says %v", text, x, v, want)
			}
		}
	})
}
