package timeline

import (
	"context"
	"fmt"
	"testing"

	"github.com/walapply/walapply/protocol"
)

// fakeHistories holds the source's history files, by timeline, and
// counts what was read.
type fakeHistories struct {
	files map[int32][]protocol.TimelineSwitch
	read  []int32
}

func (f *fakeHistories) TimelineHistory(_ context.Context, tli int32) ([]protocol.TimelineSwitch, error) {
	f.read = append(f.read, tli)
	h, ok := f.files[tli]
	if !ok {
		return nil, fmt.Errorf("no history file for timeline %d: %w", tli, protocol.ErrTimelineHistory)
	}
	return h, nil
}

// TestSharedUntil: the position up to which the recorded and the current
// timeline share their WAL, and whether the origin's progress is in it,
// for the histories a failover, a chain of failovers, sibling promotions
// and a source restored to an older timeline produce; the recorded
// timeline's own history is read only when it is not an ancestor.
func TestSharedUntil(t *testing.T) {
	type sw = protocol.TimelineSwitch
	tl := func(tli int32, at protocol.LSN) sw { return sw{Timeline: tli, Switch: at} }
	const x, y, z = protocol.LSN(0x3000000), protocol.LSN(0x5000000), protocol.LSN(0x7000000)
	for _, tc := range []struct {
		name             string
		from, to         int32
		fromHist, toHist []sw // fromHist only where from is not in toHist
		progress         protocol.LSN
		wantAt           protocol.LSN
		wantSafe, ofTo   bool // ofTo: from is in to's history
	}{
		{name: "promoted, progress before the switch", from: 1, to: 2, toHist: []sw{tl(1, y)}, progress: x, wantAt: y, wantSafe: true, ofTo: true},
		{name: "promoted, progress at the switch", from: 1, to: 2, toHist: []sw{tl(1, y)}, progress: y, wantAt: y, wantSafe: true, ofTo: true},
		{name: "promoted, progress beyond the switch", from: 1, to: 2, toHist: []sw{tl(1, y)}, progress: y + 1, wantAt: y, ofTo: true},
		{name: "nothing applied yet", from: 1, to: 2, toHist: []sw{tl(1, y)}, progress: 0, wantAt: y, wantSafe: true, ofTo: true},
		{name: "two failovers, progress on the first timeline", from: 1, to: 3, toHist: []sw{tl(1, x), tl(2, y)}, progress: x, wantAt: x, wantSafe: true, ofTo: true},
		{name: "two failovers, progress past the first", from: 1, to: 3, toHist: []sw{tl(1, x), tl(2, y)}, progress: x + 8, wantAt: x, ofTo: true},
		{name: "two failovers from the middle one", from: 2, to: 3, toHist: []sw{tl(1, x), tl(2, y)}, progress: y - 8, wantAt: y, wantSafe: true, ofTo: true},
		{name: "sibling branched earlier", from: 2, to: 3, fromHist: []sw{tl(1, y)}, toHist: []sw{tl(1, x)}, progress: x, wantAt: x, wantSafe: true},
		{name: "sibling branched earlier, progress between", from: 2, to: 3, fromHist: []sw{tl(1, y)}, toHist: []sw{tl(1, x)}, progress: x + 1, wantAt: x},
		{name: "sibling branched later", from: 2, to: 3, fromHist: []sw{tl(1, x)}, toHist: []sw{tl(1, z)}, progress: y, wantAt: x},
		{name: "cousins", from: 3, to: 4, fromHist: []sw{tl(1, x), tl(2, z)}, toHist: []sw{tl(1, y)}, progress: x, wantAt: x, wantSafe: true},
		{name: "restored to the parent timeline", from: 2, to: 1, fromHist: []sw{tl(1, y)}, progress: y, wantAt: y, wantSafe: true},
		{name: "restored to the parent, progress beyond", from: 2, to: 1, fromHist: []sw{tl(1, y)}, progress: z, wantAt: y},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &fakeHistories{files: map[int32][]sw{tc.to: tc.toHist}}
			if tc.fromHist != nil {
				h.files[tc.from] = tc.fromHist
			}
			at, err := SharedUntil(context.Background(), h, tc.from, tc.to)
			if err != nil {
				t.Fatal(err)
			}
			if at != tc.wantAt {
				t.Errorf("shared until %s, want %s", at, tc.wantAt)
			}
			if safe := tc.progress <= at; safe != tc.wantSafe {
				t.Errorf("progress %s against %s: safe %v, want %v", tc.progress, at, safe, tc.wantSafe)
			}
			if wantReads := 2 - btoi(tc.ofTo); len(h.read) != wantReads {
				t.Errorf("read the histories of %v, want %d", h.read, wantReads)
			}
		})
	}
	h := &fakeHistories{files: map[int32][]sw{2: {tl(1, x)}}}
	if at, err := SharedUntil(context.Background(), h, 2, 2); err != nil || at != EndOfTime {
		t.Errorf("a timeline shares its WAL with itself up to %s (%v), want no end", at, err)
	}
}

// TestSharedUntilUnreadable: a history the source does not give is the
// error, whichever of the two it is.
func TestSharedUntilUnreadable(t *testing.T) {
	h := &fakeHistories{files: map[int32][]protocol.TimelineSwitch{3: {{Timeline: 1, Switch: 0x3000000}}}}
	if _, err := SharedUntil(context.Background(), h, 2, 3); err == nil {
		t.Error("sibling without its history file: no error")
	}
	if _, err := SharedUntil(context.Background(), h, 1, 4); err == nil {
		t.Error("current timeline without its history file: no error")
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
