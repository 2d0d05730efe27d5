// Package timeline tells up to which position two timelines of the source
// share their WAL, from the source's timeline histories: the decision the
// preflight needs when the source is on another timeline than the one the
// applier last started on (a failover, sibling promotions, a source
// restored to an older timeline). The target's progress at or before that
// position is in the new timeline's history; beyond it, the target holds
// transactions the source no longer has. It is apart from apply so that
// this decision is tested on histories alone; it reads them only through
// Histories.
package timeline

import (
	"context"
	"math"
	"slices"

	"github.com/walapply/walapply/protocol"
)

// EndOfTime stands for "no switch point": a timeline's own WAL goes on.
// SharedUntil returns it for one and the same timeline.
const EndOfTime = protocol.LSN(math.MaxUint64)

// Histories gives a timeline's history (TIMELINE_HISTORY): the source's
// replication connection (*protocol.ReplConn) in walapply, a fake in the
// tests.
type Histories interface {
	TimelineHistory(ctx context.Context, tli int32) ([]protocol.TimelineSwitch, error)
}

// SharedUntil returns the position up to which timelines from and to share
// their WAL. It reads to's history, and from's too when from is not an
// ancestor of to (a sibling branch, or a source restored to an older
// timeline: its own history tells where they part). A history that cannot
// be read is returned as the error, unwrapped, for the caller to classify.
func SharedUntil(ctx context.Context, h Histories, from, to int32) (protocol.LSN, error) {
	current, err := h.TimelineHistory(ctx, to)
	if err != nil {
		return protocol.InvalidLSN, err
	}
	past, found := historyOf(current, to, from)
	if !found {
		if past, err = h.TimelineHistory(ctx, from); err != nil {
			return protocol.InvalidLSN, err
		}
	}
	return sharedUntil(ancestry(past, from), ancestry(current, to)), nil
}

// ancestry is a timeline's history with the timeline itself appended, its
// WAL running on without end: each entry owns the WAL from the previous
// entry's switch point to its own.
func ancestry(history []protocol.TimelineSwitch, tli int32) []protocol.TimelineSwitch {
	return append(slices.Clone(history), protocol.TimelineSwitch{Timeline: tli, Switch: EndOfTime})
}

// sharedUntil returns the position up to which two timelines' WAL is the
// same (EndOfTime for one and the same timeline), given their ancestries.
// The ancestries agree entry by entry up to the first timeline that is
// not the other's, or that one of them leaves earlier than the other.
func sharedUntil(a, b []protocol.TimelineSwitch) protocol.LSN {
	shared := protocol.InvalidLSN
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i].Timeline != b[i].Timeline {
			return shared
		}
		if a[i].Switch != b[i].Switch {
			return min(a[i].Switch, b[i].Switch)
		}
		shared = a[i].Switch
	}
	return shared
}

// historyOf returns timeline tli's history as far as current's history
// tells it (tli is an ancestor of current, or current itself), and false
// when tli is not in it.
func historyOf(current []protocol.TimelineSwitch, currentTLI, tli int32) ([]protocol.TimelineSwitch, bool) {
	if tli == currentTLI {
		return current, true
	}
	for i, s := range current {
		if s.Timeline == tli {
			return current[:i], true
		}
	}
	return nil, false
}
