package apply

import (
	"strings"
	"testing"

	"github.com/walapply/walapply/protocol"
)

// TestTimelineDecision: the position up to which the recorded and the
// current timeline share their WAL, and whether the origin's progress is
// in it, for the histories a failover, a chain of failovers, sibling
// promotions and a source restored to an older timeline produce.
func TestTimelineDecision(t *testing.T) {
	type sw = protocol.TimelineSwitch
	tl := func(tli int32, at protocol.LSN) sw { return sw{Timeline: tli, Switch: at} }
	const x, y, z = protocol.LSN(0x3000000), protocol.LSN(0x5000000), protocol.LSN(0x7000000)
	for _, tc := range []struct {
		name                string
		from, to            int32
		fromHist, toHist    []sw // fromHist only where from is not in toHist
		progress            protocol.LSN
		wantAt              protocol.LSN
		wantSafe, wantFound bool
	}{
		{name: "promoted, progress before the switch", from: 1, to: 2, toHist: []sw{tl(1, y)}, progress: x, wantAt: y, wantSafe: true, wantFound: true},
		{name: "promoted, progress at the switch", from: 1, to: 2, toHist: []sw{tl(1, y)}, progress: y, wantAt: y, wantSafe: true, wantFound: true},
		{name: "promoted, progress beyond the switch", from: 1, to: 2, toHist: []sw{tl(1, y)}, progress: y + 1, wantAt: y, wantFound: true},
		{name: "nothing applied yet", from: 1, to: 2, toHist: []sw{tl(1, y)}, progress: 0, wantAt: y, wantSafe: true, wantFound: true},
		{name: "two failovers, progress on the first timeline", from: 1, to: 3, toHist: []sw{tl(1, x), tl(2, y)}, progress: x, wantAt: x, wantSafe: true, wantFound: true},
		{name: "two failovers, progress past the first", from: 1, to: 3, toHist: []sw{tl(1, x), tl(2, y)}, progress: x + 8, wantAt: x, wantFound: true},
		{name: "two failovers from the middle one", from: 2, to: 3, toHist: []sw{tl(1, x), tl(2, y)}, progress: y - 8, wantAt: y, wantSafe: true, wantFound: true},
		{name: "sibling branched earlier", from: 2, to: 3, fromHist: []sw{tl(1, y)}, toHist: []sw{tl(1, x)}, progress: x, wantAt: x, wantSafe: true},
		{name: "sibling branched earlier, progress between", from: 2, to: 3, fromHist: []sw{tl(1, y)}, toHist: []sw{tl(1, x)}, progress: x + 1, wantAt: x},
		{name: "sibling branched later", from: 2, to: 3, fromHist: []sw{tl(1, x)}, toHist: []sw{tl(1, z)}, progress: y, wantAt: x},
		{name: "cousins", from: 3, to: 4, fromHist: []sw{tl(1, x), tl(2, z)}, toHist: []sw{tl(1, y)}, progress: x, wantAt: x, wantSafe: true},
		{name: "restored to the parent timeline", from: 2, to: 1, fromHist: []sw{tl(1, y)}, progress: y, wantAt: y, wantSafe: true},
		{name: "restored to the parent, progress beyond", from: 2, to: 1, fromHist: []sw{tl(1, y)}, progress: z, wantAt: y},
	} {
		t.Run(tc.name, func(t *testing.T) {
			past, found := historyOf(tc.toHist, tc.to, tc.from)
			if found != tc.wantFound {
				t.Fatalf("historyOf found %v, want %v", found, tc.wantFound)
			}
			if !found {
				past = tc.fromHist
			}
			at := sharedUntil(ancestry(past, tc.from), ancestry(tc.toHist, tc.to))
			if at != tc.wantAt {
				t.Errorf("shared until %s, want %s", at, tc.wantAt)
			}
			if safe := tc.progress <= at; safe != tc.wantSafe {
				t.Errorf("progress %s against %s: safe %v, want %v", tc.progress, at, safe, tc.wantSafe)
			}
		})
	}
	if at := sharedUntil(ancestry([]sw{tl(1, x)}, 2), ancestry([]sw{tl(1, x)}, 2)); at != endOfTime {
		t.Errorf("a timeline shares its WAL with itself up to %s, want no end", at)
	}
}

// TestDivergedErrorText: the refusal names both positions, both timelines,
// what the target holds and what the operator can do.
func TestDivergedErrorText(t *testing.T) {
	err := divergedError("app", "walapply_app", timelineSwitch{from: 1, to: 2, at: 0x3000000, progress: 0x3000100})
	for _, want := range []string{"0/3000100", "0/3000000", "timeline 1", "timeline 2", "never had", "--copy", "walapply drop --name app", "--allow-timeline-change"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
}
