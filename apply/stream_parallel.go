package apply

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/protocol"
)

// parallelPool applies streamed transactions as they stream, with
// --streaming parallel (pgoutput protocol 4, PostgreSQL 16+), each on a
// target connection of its own (parallelWorker), as PostgreSQL's parallel
// apply workers do (applyparallelworker.c).
//
// Applying as they stream. The first Stream Start of a transaction takes
// an idle worker (at most Config.ParallelWorkers, like
// max_parallel_apply_workers_per_subscription); when none is idle, the
// transaction takes the spill path (stream.go), as PostgreSQL's leader
// serialises to a file. The worker opens a target transaction and applies
// the block's changes as the run loop hands them over, through a bounded
// queue: nothing of the transaction is held in memory beyond that queue and
// the worker's batch, and nothing is spilled (DESIGN.md invariant 3). A
// change of a subtransaction not seen before first defines a savepoint
// named after it; the Stream Abort of a subtransaction rolls back to its
// savepoint, which also discards the subtransactions nested in it, because
// every change after a subtransaction's first one belongs to it or to them
// until it ends (invariant 4, as for spill files); the Stream Abort of the
// transaction rolls it back.
//
// Commit order. A worker's transaction commits only at its Stream Commit,
// and the run loop hands that over only after everything before it is
// committed on the target (Stream Commit needs its own transaction: the
// main connection's group is committed and settled first), then waits for
// the worker's COMMIT before it reads the next message. So target commits,
// on whichever connection, happen one at a time in the source's commit
// order, and their records lie in the target's WAL in that order.
//
// Progress (invariant 1) with one origin per session (PostgreSQL 15–18).
// Each worker has an origin of its own (parallelOriginName), set up on its
// connection for the session, so its changes carry an origin (invariant 8),
// and its COMMIT or PREPARE TRANSACTION advances that origin to the source
// transaction's end LSN inside the same transaction. Right after it, the
// main connection commits a transaction of its own that advances the
// applier's origin to the same LSN (commit, with nothing else in it). So
// the applier's origin names the last applied transaction again, and every
// reader of it (feedback, status, the preflight, --until) is unchanged:
// feedback flushes the target's WAL up to that small commit, which lies
// after the worker's, so nothing is confirmed before it is durable
// (invariant 2). The one gap is a crash between the two commits: the
// worker's origin is then ahead of the applier's. repairParallelOrigins, at
// every connect before the start position is read, moves the applier's
// origin up to the furthest worker origin. That is exact: commits are in
// source order in the target's WAL, so if a worker's commit survived a
// crash, every earlier source transaction's did; and no later transaction
// can be on the target, since its commit would have advanced an origin
// further. Stale worker origins (a worker's last transaction long ago) are
// behind the applier's origin and change nothing.
//
// Two-phase. Stream Prepare prepares the worker's transaction under its
// GID, advancing the worker's origin to the prepare's end; the main
// connection's origin follows as after a commit; COMMIT PREPARED and
// ROLLBACK PREPARED run on the main connection as always (prepare.go).
//
// Fallback. A worker that fails for any reason (a conflict, a lost
// connection, a lock wait that cannot end, see lockWatch) rolls back, and
// the session ends with parallelFallbackError: Run starts the next session
// at once with the transaction's xid marked for the spill path, so the
// source sends it again from its first change and it is applied as with
// --streaming on, with that path's error handling. Nothing was committed or
// confirmed of it, so nothing is lost or doubled. The fallback is logged and
// counted (Stats.ParallelFallbacks).
//
// A transaction also takes the spill path when --skip-lsn is armed, or a
// table's initial copy still filters changes (copy_filter.go), or a table
// is being copied (refresh_sync.go): those decisions need the commit LSN,
// which only Stream Commit brings; and with --ddl, whose messages inside a
// transaction the worker does not apply (ddl_apply.go).
type parallelPool struct {
	cfg     *Config
	size    int
	workers []*parallelWorker
	// byXid holds the worker of every transaction applied as it streams
	// and not yet committed, prepared or aborted.
	byXid map[uint32]*parallelWorker
	block *parallelWorker // the worker of the open stream block
	watch *lockWatch
	// mainPID is the main applying connection's backend.
	mainPID uint32
}

// defaultParallelWorkers is Config.ParallelWorkers' default, as
// max_parallel_apply_workers_per_subscription's.
const defaultParallelWorkers = 2

// checkParallelConfig validates Config.ParallelWorkers.
func checkParallelConfig(cfg *Config) error {
	switch {
	case cfg.ParallelWorkers < 0:
		return fmt.Errorf("%w: --parallel-workers %d: want 0 or more", ErrConfig, cfg.ParallelWorkers)
	case cfg.ParallelWorkers == 0:
		cfg.ParallelWorkers = defaultParallelWorkers
	}
	return nil
}

// parallelFallbackError ends a session so that streamed transaction xid is
// applied through the spill path in the next (see parallelPool).
type parallelFallbackError struct {
	xid    uint32
	reason error
}

func (e *parallelFallbackError) Error() string {
	return fmt.Sprintf("applying streamed transaction %d as it streamed: %v; it is applied from a spill file instead", e.xid, e.reason)
}

// parallelFallback is the hook in Run's retry loop: it reports whether err
// is a fallback, and marks the transaction for the spill path.
//
// A deadlock or lock timeout on the main connection while transactions
// were applied as they streamed (PostgreSQL's deadlock detector chose the
// main connection's side of a cycle with a worker) is not a fallback: Run
// retries it as any transient error, but those transactions are spilled in
// the next session, so that the cycle cannot come back.
func (c *Config) parallelFallback(err error) bool {
	if c.spillXids == nil {
		c.spillXids = map[uint32]bool{}
	}
	var pf *parallelFallbackError
	if !errors.As(err, &pf) {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "55P03") && len(c.openParallel) > 0 {
			for _, xid := range c.openParallel {
				c.spillXids[xid] = true
			}
			c.Logger.Warn().Uints32("xids", c.openParallel).Err(err).
				Msg("a lock conflict ended the session while streamed transactions were applied as they streamed; the source sends them again and they are spilled")
		}
		return false
	}
	c.spillXids[pf.xid] = true
	c.Logger.Warn().Uint32("xid", pf.xid).AnErr("reason", pf.reason).
		Msg("a streamed transaction cannot be applied as it streams; reconnecting at once, the source sends it again and it is spilled and applied at its commit")
	return true
}

// startParallel sets up the pool for a session with --streaming parallel.
func (s *session) startParallel(ctx context.Context) error {
	if s.cfg.Streaming != "parallel" || s.cfg.ParallelWorkers <= 0 {
		return nil
	}
	p := &parallelPool{cfg: s.cfg, size: s.cfg.ParallelWorkers, byXid: map[uint32]*parallelWorker{}, mainPID: s.target.PgConn().PID()}
	w, err := startLockWatch(ctx, s.cfg, p)
	if err != nil {
		return err
	}
	p.watch = w
	s.applier.stream.par = p
	return nil
}

// closeParallel ends the pool's workers: their open transactions roll back
// (the source sends them again).
func (s *session) closeParallel() {
	if s.applier == nil || s.applier.stream.par == nil {
		return
	}
	p := s.applier.stream.par
	s.cfg.openParallel = slices.Collect(maps.Keys(p.byXid))
	p.watch.stop()
	for _, w := range p.workers {
		w.close()
	}
	s.applier.stream.par = nil
}

// usable reports whether the transaction xid may be applied as it streams.
func (p *parallelPool) usable(a *applier, xid uint32) bool {
	switch {
	case p.cfg.spillXids[xid]:
		return false
	case a.skipLSN != 0:
		return false
	case a.ddl != nil:
		return false // --ddl: its messages are applied by the run loop's applier (ddl_apply.go)
	case a.copied != nil && a.applied < a.copied.until:
		return false
	case a.watch != nil && len(a.watch.syncs.tables) > 0:
		return false
	}
	return true
}

// take returns an idle worker for the new streamed transaction xid, or nil
// when it is to be spilled.
func (p *parallelPool) take(ctx context.Context, a *applier, xid uint32) *parallelWorker {
	if !p.usable(a, xid) {
		return nil
	}
	for _, w := range p.workers {
		if !w.busy && !w.failed.Load() {
			w.busy = true
			return w
		}
	}
	if len(p.workers) >= p.size {
		return nil
	}
	w, err := newParallelWorker(ctx, p.cfg, a, len(p.workers)+1)
	if err != nil {
		// Not fatal: the transaction is spilled.
		a.log.Warn().Err(err).Uint32("xid", xid).Msg("cannot open a connection to apply a streamed transaction as it streams; it is spilled")
		return nil
	}
	p.workers = append(p.workers, w)
	p.watch.add(w)
	w.busy = true
	return w
}

// release ends xid's hold on its worker: the jobs the run loop hands over
// after its end are for the worker's next transaction.
func (p *parallelPool) release(xid uint32) {
	if w := p.byXid[xid]; w != nil {
		w.busy = false
		delete(p.byXid, xid)
	}
}

// parallelStream is the hook in handleStream: it acts on the stream events
// of transactions applied as they stream, and reports whether it did
// (false: the spill path acts on it).
func (a *applier) parallelStream(ctx context.Context, ev event, msg protocol.Message) (handled bool, err error) {
	defer func() { a.countFallback(err) }()
	p := a.stream.par
	if p == nil {
		return false, nil
	}
	switch ev {
	case evStreamStart:
		m := msg.(*protocol.StreamStart)
		w := p.byXid[m.Xid]
		if m.FirstSegment {
			if w = p.take(ctx, a, m.Xid); w == nil {
				return false, nil
			}
			p.byXid[m.Xid] = w
			w.push(pjob{kind: jobBegin, xid: m.Xid})
			a.log.Debug().Uint32("xid", m.Xid).Int("worker", w.id).Msg("streamed transaction applied as it streams")
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
		p.block = w
		return true, w.check()
	case evStreamStop:
		w := p.block
		if w == nil {
			return false, nil
		}
		p.block = nil
		w.push(pjob{kind: jobIdle})
		return true, w.check()
	case evStreamChange:
		w := p.block
		if w == nil {
			return false, nil
		}
		w.add(a.stream.raw, streamedXid(msg))
		return true, w.check()
	case evStreamAbort:
		m := msg.(*protocol.StreamAbort)
		w := p.byXid[m.Xid]
		if w == nil {
			return false, nil
		}
		if m.Toplevel() {
			p.release(m.Xid)
			w.push(pjob{kind: jobRollback})
			a.log.Debug().Uint32("xid", m.Xid).Msg("streamed transaction aborted; rolled back on its parallel connection")
			return true, nil
		}
		w.push(pjob{kind: jobAbortSub, subxid: m.SubXid})
		a.log.Debug().Uint32("xid", m.Xid).Uint32("subxid", m.SubXid).
			Msg("subtransaction of a streamed transaction aborted; rolled back to its savepoint on its parallel connection")
		return true, w.check()
	case evStreamCommit:
		m := msg.(*protocol.StreamCommit)
		w := p.byXid[m.Xid]
		if w == nil {
			return false, nil
		}
		return true, a.parallelCommit(ctx, w, m)
	}
	return false, nil
}

// parallelCommit commits a transaction applied as it streamed (see
// parallelPool: the worker's commit, then the applier's origin).
func (a *applier) parallelCommit(ctx context.Context, w *parallelWorker, m *protocol.StreamCommit) error {
	a.stream.par.release(m.Xid)
	a.outcome.Began = true
	a.txn = openTxn{xid: m.Xid, finalLSN: m.CommitLSN, commitTime: m.CommitTime, skip: alreadyApplied(m.CommitLSN, a.applied)}
	if a.txn.skip {
		w.push(pjob{kind: jobRollback})
		a.noteSkipped()
		return nil
	}
	if a.watch != nil && len(a.watch.syncs.tables) > 0 {
		w.push(pjob{kind: jobRollback})
		return &parallelFallbackError{xid: m.Xid, reason: errors.New("a table is being copied")}
	}
	start := time.Now()
	if err := w.call(pjob{kind: jobCommit, end: m.EndLSN, at: m.CommitTime, lsn: m.CommitLSN, applied: a.applied}); err != nil {
		return &parallelFallbackError{xid: m.Xid, reason: err}
	}
	if f := a.stream.par.cfg.parallelCommitted; f != nil {
		if err := f(m.Xid); err != nil {
			return err
		}
	}
	inserts, copied := a.Stats.Inserts.Load(), a.Stats.CopiedRows.Load()
	w.mergeStats(&a.Stats)
	a.Stats.ParallelApplied.Add(1)
	a.log.Info().Uint32("xid", m.Xid).Stringer("commit_lsn", m.CommitLSN).Int("worker", w.id).
		Int64("inserts", a.Stats.Inserts.Load()-inserts).Int64("copied_rows", a.Stats.CopiedRows.Load()-copied).
		Int("copies", w.cp.copies).
		Float64("commit_seconds", seconds(time.Since(start))).Msg("applied a streamed transaction as it streamed; committed")
	return a.advanceAfterParallel(ctx, m.EndLSN, m.CommitTime)
}

// advanceAfterParallel commits, on the main connection, a transaction that
// only advances the applier's origin to end, after a worker committed or
// prepared the source transaction ending there (see parallelPool).
func (a *applier) advanceAfterParallel(ctx context.Context, end protocol.LSN, at protocol.Timestamp) error {
	a.queue.TxnXid, a.queue.TxnLSN = a.txn.xid, a.txn.finalLSN
	a.sess.Begin()
	// Nothing written here: the origin advance gives the transaction an
	// xid, or its commit would not move the origin (state.XactSetupSQL).
	return a.commit(ctx, end, at)
}

// parallelPrepare is the hook in streamPrepare for a transaction applied as
// it streamed: it reports whether it was one.
func (a *applier) parallelPrepare(ctx context.Context, m *protocol.StreamPrepare) (handled bool, err error) {
	defer func() { a.countFallback(err) }()
	p := a.stream.par
	if p == nil || p.byXid[m.Xid] == nil {
		return false, nil
	}
	w := p.byXid[m.Xid]
	p.release(m.Xid)
	skip, err := a.startPrepared(ctx, m.Xid, m.PrepareLSN, m.PrepareTime, m.GID)
	if err != nil {
		w.push(pjob{kind: jobRollback})
		return true, err
	}
	if skip {
		w.push(pjob{kind: jobRollback})
		a.tpSkipped()
		return true, nil
	}
	gid := a.tp.gid
	if err := w.call(pjob{kind: jobPrepare, end: m.EndLSN, at: m.PrepareTime, lsn: m.PrepareLSN, gid: gid, applied: a.applied}); err != nil {
		return true, &parallelFallbackError{xid: m.Xid, reason: err}
	}
	w.mergeStats(&a.Stats)
	a.Stats.ParallelApplied.Add(1)
	a.tp.prepared[gid] = true
	a.log.Debug().Uint32("xid", m.Xid).Str("gid", gid).Stringer("end_lsn", m.EndLSN).Int("worker", w.id).Msg("prepared on its parallel connection")
	return true, a.advanceAfterParallel(ctx, m.EndLSN, m.PrepareTime)
}

// countFallback counts a fallback to the spill path in Stats.
func (a *applier) countFallback(err error) {
	var pf *parallelFallbackError
	if errors.As(err, &pf) {
		a.Stats.ParallelFallbacks.Add(1)
	}
}
