package engine

import (
	"context"
	"errors"
	"time"

	"github.com/walapply/walapply/apply/internal/parallel"
	"github.com/walapply/walapply/protocol"
)

// parallelUsable reports whether the transaction xid may be applied as it
// streams (see parallel's package doc: the decisions that need the commit
// LSN, and --ddl, keep the spill path).
func (a *Applier) parallelUsable(xid uint32) bool {
	switch {
	case a.stream.spillOnly != nil && a.stream.spillOnly(xid):
		return false
	case a.skipLSN != 0:
		return false
	case a.ddl != nil:
		return false // --ddl: its messages are applied by the run loop's applier (ddl_apply.go)
	case a.copied != nil && a.applied < a.copied.Until():
		return false
	case a.watch != nil && len(a.watch.syncs.tables) > 0:
		return false
	}
	return true
}

// parallelStream is the hook in handleStream: it acts on the stream events
// of transactions applied as they stream, and reports whether it did
// (false: the spill path acts on it).
func (a *Applier) parallelStream(ctx context.Context, ev Event, msg protocol.Message) (handled bool, err error) {
	defer func() { a.countFallback(err) }()
	p := a.stream.par
	if p == nil {
		return false, nil
	}
	switch ev {
	case EvStreamStart:
		m := msg.(*protocol.StreamStart)
		w := p.Of(m.Xid)
		if m.FirstSegment {
			if !a.parallelUsable(m.Xid) {
				return false, nil
			}
			w, err = p.Take(ctx, m.Xid)
			if err != nil {
				// Not fatal: the transaction is spilled.
				a.log.Warn().Err(err).Uint32("xid", m.Xid).Msg("cannot open a connection to apply a streamed transaction as it streams; it is spilled")
			}
			if w == nil {
				return false, nil
			}
			a.log.Debug().Uint32("xid", m.Xid).Int("worker", w.ID()).Msg("streamed transaction applied as it streams")
		}
		if w == nil {
			return false, nil
		}
		// The main connection holds nothing uncommitted while the worker
		// runs: a worker waiting for one of its locks would otherwise wait
		// for the run loop, which may be waiting for the worker's queue.
		if err := a.commitGroup(ctx); err != nil {
			return true, err
		}
		p.Block = w
		return true, w.Check()
	case EvStreamStop:
		w := p.Block
		if w == nil {
			return false, nil
		}
		p.Block = nil
		w.Idle()
		return true, w.Check()
	case EvStreamChange:
		w := p.Block
		if w == nil {
			return false, nil
		}
		w.Add(a.stream.raw, streamedXid(msg))
		return true, w.Check()
	case EvStreamAbort:
		m := msg.(*protocol.StreamAbort)
		w := p.Of(m.Xid)
		if w == nil {
			return false, nil
		}
		if m.Toplevel() {
			p.Release(m.Xid)
			w.Rollback()
			a.log.Debug().Uint32("xid", m.Xid).Msg("streamed transaction aborted; rolled back on its parallel connection")
			return true, nil
		}
		w.AbortSub(m.SubXid)
		a.log.Debug().Uint32("xid", m.Xid).Uint32("subxid", m.SubXid).
			Msg("subtransaction of a streamed transaction aborted; rolled back to its savepoint on its parallel connection")
		return true, w.Check()
	case EvStreamCommit:
		m := msg.(*protocol.StreamCommit)
		w := p.Of(m.Xid)
		if w == nil {
			return false, nil
		}
		return true, a.parallelCommit(ctx, w, m)
	}
	return false, nil
}

// parallelCommit commits a transaction applied as it streamed (see
// parallel's package doc: the worker's commit, then the applier's origin).
func (a *Applier) parallelCommit(ctx context.Context, w *parallel.Worker, m *protocol.StreamCommit) error {
	a.stream.par.Release(m.Xid)
	a.outcome.Began = true
	a.txn = openTxn{xid: m.Xid, finalLSN: m.CommitLSN, commitTime: m.CommitTime, skip: AlreadyApplied(m.CommitLSN, a.applied)}
	if a.txn.skip {
		w.Rollback()
		a.noteSkipped()
		return nil
	}
	if a.watch != nil && len(a.watch.syncs.tables) > 0 {
		w.Rollback()
		return &parallel.FallbackError{Xid: m.Xid, Reason: errors.New("a table is being copied")}
	}
	start := time.Now()
	if err := w.Commit(m.CommitLSN, m.EndLSN, m.CommitTime, a.applied); err != nil {
		return &parallel.FallbackError{Xid: m.Xid, Reason: err}
	}
	if f := a.stream.committed; f != nil {
		if err := f(m.Xid); err != nil {
			return err
		}
	}
	inserts, copied := a.Stats.Inserts.Load(), a.Stats.CopiedRows.Load()
	w.MoveStats()
	a.Stats.ParallelApplied.Add(1)
	a.log.Info().Uint32("xid", m.Xid).Stringer("commit_lsn", m.CommitLSN).Int("worker", w.ID()).
		Int64("inserts", a.Stats.Inserts.Load()-inserts).Int64("copied_rows", a.Stats.CopiedRows.Load()-copied).
		Int("copies", w.Copies()).
		Float64("commit_seconds", Seconds(time.Since(start))).Msg("applied a streamed transaction as it streamed; committed")
	return a.advanceAfterParallel(ctx, m.EndLSN, m.CommitTime)
}

// advanceAfterParallel commits, on the main connection, a transaction that
// only advances the applier's origin to end, after a worker committed or
// prepared the source transaction ending there (see parallel's package
// doc).
func (a *Applier) advanceAfterParallel(ctx context.Context, end protocol.LSN, at protocol.Timestamp) error {
	a.queue.TxnXid, a.queue.TxnLSN = a.txn.xid, a.txn.finalLSN
	a.sess.Begin()
	// Nothing written here: the origin advance gives the transaction an
	// xid, or its commit would not move the origin (state.XactSetupSQL).
	return a.commit(ctx, end, at)
}

// parallelPrepare is the hook in streamPrepare for a transaction applied as
// it streamed: it reports whether it was one.
func (a *Applier) parallelPrepare(ctx context.Context, m *protocol.StreamPrepare) (handled bool, err error) {
	defer func() { a.countFallback(err) }()
	p := a.stream.par
	if p == nil || p.Of(m.Xid) == nil {
		return false, nil
	}
	w := p.Of(m.Xid)
	p.Release(m.Xid)
	skip, err := a.startPrepared(ctx, m.Xid, m.PrepareLSN, m.PrepareTime, m.GID)
	if err != nil {
		w.Rollback()
		return true, err
	}
	if skip {
		w.Rollback()
		a.tpSkipped()
		return true, nil
	}
	gid := a.tp.gid
	if err := w.Prepare(m.PrepareLSN, m.EndLSN, m.PrepareTime, gid, a.applied); err != nil {
		return true, &parallel.FallbackError{Xid: m.Xid, Reason: err}
	}
	w.MoveStats()
	a.Stats.ParallelApplied.Add(1)
	a.tp.prepared[gid] = true
	a.log.Debug().Uint32("xid", m.Xid).Str("gid", gid).Stringer("end_lsn", m.EndLSN).Int("worker", w.ID()).Msg("prepared on its parallel connection")
	return true, a.advanceAfterParallel(ctx, m.EndLSN, m.PrepareTime)
}

// countFallback counts a fallback to the spill path in Stats.
func (a *Applier) countFallback(err error) {
	var pf *parallel.FallbackError
	if errors.As(err, &pf) {
		a.Stats.ParallelFallbacks.Add(1)
	}
}
