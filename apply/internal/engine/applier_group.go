package engine

import (
	"context"
	"time"

	"github.com/walapply/walapply/protocol"
)

// Pending reports whether work waits to be committed or confirmed: a
// group (open, or continued by the source transaction in progress), or a
// batch in flight. The run loop then waits for the next message only
// briefly; inside a source transaction that wait may end with nothing to
// do (CommitAndSettle is then a no-op), which is cheaper than switching the
// stream's deadline at every BEGIN and COMMIT.
func (a *Applier) Pending() bool {
	return a.group.Count > 0 || a.sess.Busy()
}

// SetClock gives the applier the time the run loop read for the message
// it is about to handle: the group's age is measured with it, so that the
// hot path reads the clock once per message, not several times.
func (a *Applier) SetClock(now time.Time) { a.now = now }

// clock is the loop's time for this message, or the time now for callers
// that do not set one.
func (a *Applier) clock() time.Time {
	if a.now.IsZero() {
		return time.Now()
	}
	return a.now
}

// CommitAndSettle commits the open group, if any, and waits for the
// target to confirm it (and anything else in flight): the run loop calls it
// before it stops.
func (a *Applier) CommitAndSettle(ctx context.Context) (Outcome, error) {
	a.outcome = Outcome{}
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
func (a *Applier) Idle(ctx context.Context) (Outcome, error) {
	a.outcome = Outcome{}
	err := a.idle(ctx)
	return a.outcome, err
}

// idle is Idle; what it does to transactions accumulates in a.outcome.
func (a *Applier) idle(ctx context.Context) error {
	if a.machine.InTransaction() {
		return nil
	}
	if a.group.Count > 0 {
		return a.commitGroup(ctx)
	}
	return a.Settle(ctx)
}

// commitGroup commits the group without waiting for the target (commit);
// no source transaction may be in progress.
func (a *Applier) commitGroup(ctx context.Context) error {
	if a.group.Count == 0 {
		return nil
	}
	a.group.Count--
	return a.commit(ctx, a.group.End, a.group.At)
}

// groupRules are the applier's settings that decide a group's end.
func (a *Applier) groupRules() GroupRules {
	return GroupRules{Grouping: a.grouping, NoGroupThrough: a.noGroupThrough, MaxWait: a.groupMaxWait}
}

// endGrouped ends a source transaction: it joins the group, or commits the
// target transaction when grouping is off or the group is full.
func (a *Applier) endGrouped(ctx context.Context, end protocol.LSN, at protocol.Timestamp) error {
	now := a.clock()
	if a.group.Ends(a.groupRules(), a.txn.finalLSN, a.sess.Full(), now) {
		return a.commit(ctx, end, at)
	}
	a.group.Join(a.txn.finalLSN, end, at, now)
	return nil
}
