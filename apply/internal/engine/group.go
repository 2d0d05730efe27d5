package engine

import (
	"time"

	"github.com/walapply/walapply/protocol"
)

// MaxGroupTxns bounds the source transactions in one target transaction.
// A group's commit writes out its compacted rows (one statement per table
// and kind of change), so larger groups mean fewer statements: on a
// 50-table backlog of 50,000 transactions the target spent 1.82 s of CPU
// with groups of 2,000 and 1.28 s with 10,000 (peak RSS 27.6 and 39.3
// MiB). Config.GroupMaxWait still bounds how long a group stays open.
const MaxGroupTxns = 10000

// Group is the run of source transactions applied in the open target
// transaction but not yet committed.
//
// Group commit. Consecutive small source transactions are folded into one
// target transaction whose origin progress is the last one's end LSN: one
// commit, one round trip and one WAL flush on the target instead of many.
// A reader of the target still only sees states that existed on the source,
// because a group is a run of source transactions in commit order, applied
// whole or not at all; and exactly-once holds because the origin advances
// with the group's commit, to the end of the last transaction in it.
//
// A group ends when it holds MaxGroupTxns transactions or a batch's bound
// of statements (pipeline.MaxBatchBytes), with the first source
// transaction to end after it has been open for Config.GroupMaxWait, when
// the next message is not immediately available (so that a quiet source
// never waits), or before anything that needs a target transaction of its
// own (a prepared or streamed transaction: Event.NeedsOwnTransaction).
//
// A permanent error in a group rolls back the transactions before the
// failing one too. Run then retries once without grouping up to the failed
// transaction, so that, as with PostgreSQL's subscriber, everything before
// it is applied and the error names exactly that transaction.
type Group struct {
	Count    int          // source transactions in the group
	FirstLSN protocol.LSN // the first one's Begin final LSN
	End      protocol.LSN // the last one's end: the origin's progress at the group's commit
	At       protocol.Timestamp
	Opened   time.Time
}

// GroupRules are the settings that decide, with the group's own state,
// where a group ends.
type GroupRules struct {
	Grouping       bool          // group commit is on
	NoGroupThrough protocol.LSN  // no grouping for transactions up to this commit LSN (Run's retry)
	MaxWait        time.Duration // Config.GroupMaxWait; 0: no age bound
}

// Ends reports whether the source transaction at hand (final: its Begin's
// final LSN), ending at now, commits the target transaction instead of
// joining the group; full: the target's queue reached a batch's bounds.
func (g *Group) Ends(r GroupRules, final protocol.LSN, full bool, now time.Time) bool {
	switch {
	case !r.Grouping, final <= r.NoGroupThrough:
		return true
	case g.Count+1 >= MaxGroupTxns, full:
		return true
	case g.Count > 0 && r.MaxWait > 0 && now.Sub(g.Opened) >= r.MaxWait:
		return true // open long enough: a backlog that keeps coming also commits
	}
	return false
}

// Join adds to the group the source transaction whose Begin's final LSN is
// final, ending at end (committed at at), at now.
func (g *Group) Join(final, end protocol.LSN, at protocol.Timestamp, now time.Time) {
	if g.Count == 0 {
		g.FirstLSN, g.Opened = final, now
	}
	g.Count++
	g.End, g.At = end, at
}
