package apply

import (
	"context"
	"time"

	"github.com/walapply/walapply/protocol"
)

// Group commit. Consecutive small source transactions are folded into one
// target transaction whose origin progress is the last one's end LSN: one
// commit, one round trip and one WAL flush on the target instead of many.
// A reader of the target still only sees states that existed on the source,
// because a group is a run of source transactions in commit order, applied
// whole or not at all; and exactly-once holds because the origin advances
// with the group's commit, to the end of the last transaction in it.
//
// A group ends when it holds maxGroupTxns transactions or maxBatchBytes of
// statements, when it has been open for Config.GroupMaxWait, when the next
// message is not immediately available (so that a quiet source never waits),
// or before anything that needs a target transaction of its own (a prepared
// or streamed transaction).
//
// A permanent error in a group rolls back the transactions before the
// failing one too. Run then retries once without grouping up to the failed
// transaction, so that, as with PostgreSQL's subscriber, everything before
// it is applied and the error names exactly that transaction.

// maxGroupTxns bounds the source transactions in one target transaction.
const maxGroupTxns = 2000

// txnGroup is the run of source transactions applied in the open target
// transaction but not yet committed.
type txnGroup struct {
	count    int // source transactions in the group
	firstLSN protocol.LSN
	end      protocol.LSN
	at       protocol.Timestamp
	opened   time.Time
}

// needsOwnTransaction: events whose target work cannot share a group.
func (e Event) needsOwnTransaction() bool {
	switch e {
	case EvBeginPrepare, EvCommitPrepared, EvRollbackPrepared, EvStreamCommit, EvStreamPrepare:
		return true
	}
	return false
}

// GroupOpen reports whether committed source transactions wait in an open
// target transaction and no further source transaction has started in it:
// the run loop then flushes them when no message is immediately available.
// (Once the next transaction has begun, the group waits for its commit.)
func (a *Applier) GroupOpen() bool { return a.group.count > 0 && !a.machine.InTransaction() }

// Pending reports whether work waits to be committed or confirmed: an
// open group, or a batch in flight between source transactions.
func (a *Applier) Pending() bool {
	return !a.machine.InTransaction() && (a.group.count > 0 || a.sess.busy())
}

// GroupOpenedAt is when the open group started.
func (a *Applier) GroupOpenedAt() time.Time { return a.group.opened }

// FlushGroup commits the open group, if GroupOpen, and waits for the
// target to confirm it (and anything else in flight): the run loop calls it
// when the stream is idle, so that progress is confirmed promptly.
func (a *Applier) FlushGroup(ctx context.Context) error {
	if a.GroupOpen() {
		if err := a.flushGroup(ctx); err != nil {
			return err
		}
	}
	if a.machine.InTransaction() {
		return nil
	}
	return a.Settle(ctx)
}

// flushGroup commits the group; no source transaction may be in progress.
func (a *Applier) flushGroup(ctx context.Context) error {
	if a.group.count == 0 {
		return nil
	}
	a.group.count--
	return a.commit(ctx, a.group.end, a.group.at)
}

// endGrouped ends a source transaction: it joins the group, or commits the
// target transaction when grouping is off or the group is full.
func (a *Applier) endGrouped(ctx context.Context, end protocol.LSN, at protocol.Timestamp) error {
	if !a.grouping || a.txn.finalLSN <= a.noGroupThrough || a.group.count+1 >= maxGroupTxns || a.sess.full() {
		return a.commit(ctx, end, at)
	}
	if a.group.count == 0 {
		a.group.firstLSN, a.group.opened = a.txn.finalLSN, time.Now()
	}
	a.group.count++
	a.group.end, a.group.at = end, at
	return nil
}
