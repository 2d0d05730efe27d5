package engine

import (
	"context"
	"errors"

	"github.com/walapply/walapply/apply/internal/compact"
	"github.com/walapply/walapply/apply/internal/pipeline"
)

// Abandon rolls back a transaction in progress (on shutdown): nothing of it
// was committed, and the source resends it.
func (a *Applier) Abandon(ctx context.Context) error {
	if (!a.machine.InTransaction() || a.txn.skip) && a.group.Count == 0 && !a.sess.Busy() {
		return nil
	}
	a.machine.Reset()
	a.group = Group{}
	a.net = compact.New()
	return a.sess.Rollback(ctx)
}

// fail ends a failed target transaction: it rolls it back, forgets the
// group and the net state, and returns err as a TxnError naming the source
// transaction (and whether it was not the group's first).
func (a *Applier) fail(ctx context.Context, err error) error {
	var te *TxnError
	if !errors.As(err, &te) {
		te = &TxnError{Xid: a.txn.xid, CommitLSN: a.txn.finalLSN, Err: err}
		err = te
	}
	if a.group.Count > 0 && te.CommitLSN != a.group.FirstLSN {
		te.Grouped = true
	}
	a.skipHint(te)
	a.group = Group{}
	a.queue.Done = a.queue.Done[:0]
	a.net = compact.New()
	if rbErr := a.sess.Rollback(ctx); rbErr != nil && !a.sess.Broken(rbErr) {
		a.log.Warn().Err(rbErr).Msg("rolling back after a failed transaction")
	}
	return err
}

// failStmt is fail for statement q of a batch (nil: the batch as a
// whole); when q is the COMMIT, it also moves the origin back (rewind.go).
func (a *Applier) failStmt(ctx context.Context, q *pipeline.Stmt, err error) error {
	err = a.failQueued(ctx, q, err)
	if q != nil && q.Op == pipeline.OpCommit {
		// The origin was set up and then the COMMIT failed: on PostgreSQL
		// 16+ the abort advanced the origin (state's package doc).
		if rerr := a.rewindOrigin(ctx, "", false); rerr != nil {
			return rerr
		}
	}
	return err
}

// failQueued is failStmt without the rewind: it names the transaction and
// statement of q in err and rolls back.
func (a *Applier) failQueued(ctx context.Context, q *pipeline.Stmt, err error) error {
	err = withColumn(q, err) // name the column of a rejected value (column_error.go)
	te := &TxnError{Xid: a.txn.xid, CommitLSN: a.txn.finalLSN, Err: asConflictError(err)}
	vague, otherUnique := unchecked(q, err), false // Run's retry checks a vague value (valuecheck.go)
	if q != nil {
		otherUnique = isOtherUnique(q.Rel, err)
	}
	SetCause(te, vague, otherUnique)
	if q != nil {
		if q.Xid != 0 {
			te.Xid, te.CommitLSN = q.Xid, q.CommitLSN
		}
		// Only a failure in a later transaction of a group makes the
		// group matter for the retry (see Run).
		te.Grouped = q.CommitLSN != q.FirstLSN
		te.Op = q.Op.String()
		if q.Rel != nil {
			te.Relation = q.Rel.String()
		}
	}
	return a.fail(ctx, te)
}
