package apply

import (
	"context"
	"time"

	"github.com/walapply/walapply/apply/internal/engine"
	"github.com/walapply/walapply/protocol"
)

// maxGroupTxns bounds the source transactions in one target transaction.
// A group's commit writes out its compacted rows (one statement per table
// and kind of change), so larger groups mean fewer statements: on a
// 50-table backlog of 50,000 transactions the target spent 1.82 s of CPU
// with groups of 2,000 and 1.28 s with 10,000 (peak RSS 27.6 and 39.3
// MiB). Config.GroupMaxWait still bounds how long a group stays open.
const maxGroupTxns = 10000

// txnGroup is the run of source transactions applied in the open target
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
// A group ends when it holds maxGroupTxns transactions or maxBatchBytes of
// statements, with the first source transaction to end after it has been
// open for Config.GroupMaxWait, when the next
// message is not immediately available (so that a quiet source never waits),
// or before anything that needs a target transaction of its own (a prepared
// or streamed transaction).
//
// A permanent error in a group rolls back the transactions before the
// failing one too. Run then retries once without grouping up to the failed
// transaction, so that, as with PostgreSQL's subscriber, everything before
// it is applied and the error names exactly that transaction.
type txnGroup struct {
	count    int // source transactions in the group
	firstLSN protocol.LSN
	end      protocol.LSN
	at       protocol.Timestamp
	opened   time.Time
}

// Pending reports whether work waits to be committed or confirmed: a
// group (open, or continued by the source transaction in progress), or a
// batch in flight. The run loop then waits for the next message only
// briefly; inside a source transaction that wait may end with nothing to
// do (CommitAndSettle is then a no-op), which is cheaper than switching the
// stream's deadline at every BEGIN and COMMIT.
func (a *applier) Pending() bool {
	return a.group.count > 0 || a.sess.Busy()
}

// SetClock gives the applier the time the run loop read for the message
// it is about to handle: the group's age is measured with it, so that the
// hot path reads the clock once per message, not several times.
func (a *applier) SetClock(now time.Time) { a.now = now }

// clock is the loop's time for this message, or the time now for callers
// that do not set one.
func (a *applier) clock() time.Time {
	if a.now.IsZero() {
		return time.Now()
	}
	return a.now
}

// CommitAndSettle commits the open group, if any, and waits for the
// target to confirm it (and anything else in flight): the run loop calls it
// before it stops.
func (a *applier) CommitAndSettle(ctx context.Context) (engine.Outcome, error) {
	a.outcome = engine.Outcome{}
	if err := a.idle(ctx); err != nil {
		return a.outcome, err
	}
	err := a.idle(ctx)
	return a.outcome, err
}

// Idle takes one step towards having nothing pending, for a run loop whose
// stream has nothing at hand: it commits the open group without waiting
// for the target, or, with no group open, waits for the batch in flight
// and records the commit it carried. The commit is sent without waiting
// because the stream is often only briefly quiet (a walsender catching up
// after the loop was busy): the target then executes the group while the
// loop receives the next messages. If the stream stays quiet, the next
// Idle confirms the group, a millisecond later. Inside a source
// transaction it does nothing.
func (a *applier) Idle(ctx context.Context) (engine.Outcome, error) {
	a.outcome = engine.Outcome{}
	err := a.idle(ctx)
	return a.outcome, err
}

// idle is Idle; what it does to transactions accumulates in a.outcome.
func (a *applier) idle(ctx context.Context) error {
	if a.machine.InTransaction() {
		return nil
	}
	if a.group.count > 0 {
		return a.commitGroup(ctx)
	}
	return a.Settle(ctx)
}

// commitGroup commits the group without waiting for the target (commit);
// no source transaction may be in progress.
func (a *applier) commitGroup(ctx context.Context) error {
	if a.group.count == 0 {
		return nil
	}
	a.group.count--
	return a.commit(ctx, a.group.end, a.group.at)
}

// groupEnds reports whether the source transaction ending at now commits
// the target transaction instead of joining the group.
func (a *applier) groupEnds(now time.Time) bool {
	switch {
	case !a.grouping, a.txn.finalLSN <= a.noGroupThrough:
		return true
	case a.group.count+1 >= maxGroupTxns, a.sess.Full():
		return true
	case a.group.count > 0 && a.groupMaxWait > 0 && now.Sub(a.group.opened) >= a.groupMaxWait:
		return true // open long enough: a backlog that keeps coming also commits
	}
	return false
}

// endGrouped ends a source transaction: it joins the group, or commits the
// target transaction when grouping is off or the group is full.
func (a *applier) endGrouped(ctx context.Context, end protocol.LSN, at protocol.Timestamp) error {
	now := a.clock()
	if a.groupEnds(now) {
		return a.commit(ctx, end, at)
	}
	if a.group.count == 0 {
		a.group.firstLSN, a.group.opened = a.txn.finalLSN, now
	}
	a.group.count++
	a.group.end, a.group.at = end, at
	return nil
}
