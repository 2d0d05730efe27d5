package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/apply/internal/pipeline"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/state"
	"github.com/walapply/walapply/twophase"
)

// targetGID maps a source transaction to its GID on the target.
func (a *Applier) targetGID(xid uint32, sourceGID string) (string, error) {
	gid, err := twophase.TargetGID(a.tp.mode, a.tp.name, xid, sourceGID)
	if err != nil {
		return "", &PermanentError{Err: &TxnError{Xid: xid, CommitLSN: a.txn.finalLSN, Op: OpPrepare, Err: fmt.Errorf("choosing the target GID: %w", err)}}
	}
	return gid, nil
}

// startPrepared opens the source transaction that will be prepared, like a
// Begin. It reports whether the transaction is already prepared on the
// target and so is to be skipped (see the package comment in prepare.go:
// the prepare LSN alone does not tell).
func (a *Applier) startPrepared(ctx context.Context, xid uint32, prepareLSN protocol.LSN, at protocol.Timestamp, sourceGID string) (skip bool, err error) {
	a.outcome.Began = true
	a.txn = openTxn{xid: xid, finalLSN: prepareLSN, commitTime: at}
	a.queue.TxnXid, a.queue.TxnLSN = xid, prepareLSN
	gid, err := a.targetGID(xid, sourceGID)
	if err != nil {
		return false, err
	}
	a.tp.gid = gid
	if !AlreadyApplied(prepareLSN, a.applied) {
		return false, nil
	}
	prepared, err := a.sess.IsPrepared(ctx, gid)
	if err != nil {
		return false, &TxnError{Xid: xid, CommitLSN: prepareLSN, Op: OpPrepare + " " + twophase.QuoteGID(gid), Err: fmt.Errorf("looking up whether it is prepared already: %w", err)}
	}
	if prepared {
		a.log.Debug().Uint32("xid", xid).Stringer("prepare_lsn", prepareLSN).Str("gid", gid).Msg("already prepared on the target; skipped")
		return true, nil
	}
	a.log.Info().Uint32("xid", xid).Stringer("prepare_lsn", prepareLSN).Str("gid", gid).
		Msg("applying a transaction prepared before two-phase decoding began on the slot; the source sends it at its COMMIT PREPARED")
	return false, nil
}

// beginPrepare opens a transaction that the source prepared.
func (a *Applier) beginPrepare(ctx context.Context, m *protocol.BeginPrepare) error {
	skip, err := a.startPrepared(ctx, m.Xid, m.PrepareLSN, m.PrepareTime, m.GID)
	if err != nil {
		return err
	}
	a.txn.skip = skip
	a.txn.userSkip = !skip && a.skipMatches(m.PrepareLSN) // --skip-lsn (skip.go)
	a.tp.open = true
	if !skip {
		a.sess.Begin()
	}
	return nil
}

// prepare ends the open transaction with PREPARE TRANSACTION.
func (a *Applier) prepare(ctx context.Context, m *protocol.Prepare) error {
	if !a.tp.open {
		// A Prepare without Begin Prepare (see Machine): nothing to
		// prepare on the target. Its outcome then finds no prepared
		// transaction, as after PostgreSQL 15, which sends nothing at
		// PREPARE for such a transaction.
		a.outcome.Began = true
		a.log.Debug().Uint32("xid", m.Xid).Str("source_gid", m.GID).Stringer("prepare_lsn", m.PrepareLSN).
			Msg("Prepare without Begin Prepare: a prepared transaction with nothing to replicate; nothing prepared on the target")
		a.tpEnded()
		return nil
	}
	a.tp.open = false
	if a.txn.skip {
		a.tpSkipped()
		return nil
	}
	if a.txn.userSkip {
		return a.commitSkipped(ctx, m.EndLSN, m.PrepareTime)
	}
	a.notePassed(m.PrepareLSN)
	return a.prepareTxn(ctx, m.EndLSN, m.PrepareTime)
}

// streamPrepare replays a streamed transaction from its spill file and
// prepares it.
func (a *Applier) streamPrepare(ctx context.Context, m *protocol.StreamPrepare) error {
	if done, err := a.parallelPrepare(ctx, m); done { // stream_parallel.go
		return err
	}
	skip, err := a.startPrepared(ctx, m.Xid, m.PrepareLSN, m.PrepareTime, m.GID)
	if err != nil {
		return err
	}
	if skip {
		if err := a.dropSpilled(m.Xid); err != nil {
			return err
		}
		a.tpSkipped()
		return nil
	}
	if a.skipMatches(m.PrepareLSN) { // --skip-lsn (skip.go): committed empty, not prepared
		if err := a.dropSpilled(m.Xid); err != nil {
			return err
		}
		a.sess.Begin()
		return a.commitSkipped(ctx, m.EndLSN, m.PrepareTime)
	}
	if err := a.replaySpilled(ctx, m.Xid); err != nil {
		return err
	}
	a.notePassed(m.PrepareLSN)
	if err := a.prepareTxn(ctx, m.EndLSN, m.PrepareTime); err != nil {
		return err
	}
	if err := a.dropSpilled(m.Xid); err != nil {
		// The transaction is prepared; the file is only garbage now, and
		// the next start removes it.
		a.log.Warn().Err(err).Uint32("xid", m.Xid).Msg("removing the spill file of a prepared streamed transaction")
	}
	return nil
}

// prepareTxn queues the origin setup, as the last statement, and PREPARE
// TRANSACTION, and waits for them: the prepared transaction must be known
// to exist before anything else happens on the session.
func (a *Applier) prepareTxn(ctx context.Context, end protocol.LSN, at protocol.Timestamp) error {
	gid := a.tp.gid
	a.params = append(state.AppendXactSetupArgs(a.params[:0], end, at.Time()), []byte(gid))
	a.formats = append(a.formats[:0], 0, 0, 0)
	a.sess.QueueStmt(pipeline.OpOrigin, nil, a.tp.setupUnless, a.params, a.formats, 0, 0)
	a.sess.QueueSQL(pipeline.OpCommit, nil, twophase.PrepareSQL(gid))
	if failed, err := a.sess.Flush(ctx); err != nil {
		return a.failPrepare(ctx, failed, err)
	}
	a.collect()
	a.tp.prepared[gid] = true
	a.tpApplied(end, at)
	a.log.Debug().Uint32("xid", a.txn.xid).Str("gid", gid).Stringer("end_lsn", end).Msg("prepared")
	return nil
}

// failPrepare rolls back after a failed batch that ended with PREPARE
// TRANSACTION. When the failure came at or after the origin setup, the
// origin may have advanced without the transaction (PostgreSQL 16+), and is
// moved back.
func (a *Applier) failPrepare(ctx context.Context, failed *pipeline.Stmt, err error) error {
	gid := a.tp.gid
	afterSetup := failed == nil || failed.Op == pipeline.OpOrigin || failed.Op == pipeline.OpCommit
	if failed != nil && failed.Op == pipeline.OpCommit {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			switch pgErr.Code {
			case "42710": // duplicate_object: the GID is in use
				err = fmt.Errorf("%w (a transaction is already prepared on the target under GID %q: with --gid-mode source, another source or client uses the same GID "+
					"(use --gid-mode applier); otherwise it is a leftover of an earlier run: finish it by hand, then restart)", err, gid)
			case "53200": // out_of_memory: no free prepared-transaction slot
				err = fmt.Errorf("%w (raise max_prepared_transactions on the target, then restart)", err)
			}
		}
	}
	ferr := a.failQueued(ctx, failed, err)
	var te *TxnError
	if errors.As(ferr, &te) && failed != nil && (failed.Op == pipeline.OpCommit || failed.Op == pipeline.OpOrigin) {
		te.Op = OpPrepare + " " + twophase.QuoteGID(gid)
	}
	if !afterSetup {
		return ferr
	}
	if rerr := a.rewindOrigin(ctx, gid, failed == nil); rerr != nil {
		return rerr
	}
	return ferr
}

// finish is a Commit Prepared or Rollback Prepared.
type finish struct {
	commit    bool
	xid       uint32
	sourceGID string
	start     protocol.LSN // Commit Prepared: the commit record's LSN
	end       protocol.LSN // the outcome's end LSN
	at        protocol.Timestamp
	// Rollback Prepared: the end and time of the PREPARE it rolls back.
	prepareEnd  protocol.LSN
	prepareTime protocol.Timestamp
}

func (f *finish) what() string {
	if f.commit {
		return OpCommitPrepared
	}
	return OpRollbackPrepared
}

// finishPrepared runs COMMIT PREPARED or ROLLBACK PREPARED, with the origin
// set up just before it on the same session so that its record advances
// the origin to the outcome's end.
func (a *Applier) finishPrepared(ctx context.Context, f finish) error {
	a.outcome.Began = true
	lsn := f.start
	if lsn == 0 {
		lsn = f.end
	}
	a.txn = openTxn{xid: f.xid, finalLSN: lsn, commitTime: f.at}
	a.queue.TxnXid, a.queue.TxnLSN = f.xid, lsn
	gid, err := a.targetGID(f.xid, f.sourceGID)
	if err != nil {
		return err
	}
	what := f.what() + " " + twophase.QuoteGID(gid)
	found, err := a.sess.XactSetupIfPrepared(ctx, f.end, f.at.Time(), gid)
	if err != nil {
		return &TxnError{Xid: f.xid, CommitLSN: lsn, Op: what, Err: fmt.Errorf("setting up the origin: %w", err)}
	}
	if !found {
		a.notPrepared(&f, gid)
		return nil
	}
	if err := a.sess.Exec(ctx, twophase.FinishSQL(gid, f.commit)); err != nil {
		// The setup is still on the session: clear it before anything else
		// runs there (state's package doc). A lost connection took it along.
		if !a.sess.Lost() {
			if rerr := a.sess.XactReset(ctx); rerr != nil {
				a.log.Warn().Err(rerr).Msg("resetting the origin setup after a failed " + f.what())
			}
		}
		return &TxnError{Xid: f.xid, CommitLSN: lsn, Op: what, Err: err}
	}
	delete(a.tp.prepared, gid)
	a.tp.leftovers.Finished(gid)
	a.tpApplied(f.end, f.at)
	a.log.Debug().Uint32("xid", f.xid).Str("gid", gid).Stringer("end_lsn", f.end).Msg(f.what())
	return nil
}

// notPrepared handles an outcome whose GID is not prepared on the target.
func (a *Applier) notPrepared(f *finish, gid string) {
	ours := a.tp.prepared[gid]
	delete(a.tp.prepared, gid)
	if AlreadyApplied(f.end-1, a.applied) && !ours { // f.end is the record's end
		// Finished before a restart: the origin is past it.
		a.log.Debug().Uint32("xid", f.xid).Str("gid", gid).Stringer("end_lsn", f.end).Msg(f.what() + " already applied; skipped")
		a.tpSkipped()
		return
	}
	ev := a.log.Info()
	msg := "no such prepared transaction on the target: the source sent nothing at its PREPARE (no changes to replicate, or prepared before two-phase decoding began on the slot); nothing to do"
	if f.xid == a.skippedXid && a.skippedXid != 0 {
		msg = "no such prepared transaction on the target: it was skipped at its PREPARE by --skip-lsn; nothing to do"
	} else if ours {
		// A transaction this session prepared has gone: someone finished
		// it on the target by hand.
		ev = a.log.Warn()
		msg = "the transaction this applier prepared on the target is no longer prepared there: someone finished it by hand"
	}
	ev.Uint32("xid", f.xid).Str("gid", gid).Str("source_gid", f.sourceGID).Stringer("end_lsn", f.end).
		Stringer("prepare_end_lsn", f.prepareEnd).Msg(f.what() + ": " + msg)
	a.tpEnded()
}

// tpApplied records the outcome of a two-phase step that committed or
// prepared its transaction, for the run loop's FlushTracker
// (Outcome.FoldApplied: added to the commits Handle may already
// have recorded).
func (a *Applier) tpApplied(end protocol.LSN, at protocol.Timestamp) {
	a.applied, a.appliedTime = end, at
	a.Stats.TxnsApplied.Add(1)
	a.outcome.FoldApplied(end)
}

// tpSkipped records a two-phase step that skipped its transaction
// (Outcome.FoldSkipped).
func (a *Applier) tpSkipped() {
	a.Stats.TxnsSkipped.Add(1)
	a.outcome.FoldSkipped()
}

// tpEnded records a two-phase step that ended its transaction with
// nothing to commit (Outcome.FoldEnded).
func (a *Applier) tpEnded() { a.outcome.FoldEnded() }
