package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/apply/internal/compact"
	"github.com/walapply/walapply/apply/internal/pipeline"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/state"
	"github.com/walapply/walapply/twophase"
)

// parallelWorker applies one streamed transaction at a time on a target
// connection of its own, on a goroutine fed by the run loop through jobs
// (see parallelPool). It owns an applier of its own (its relation cache,
// prepared statements and batch) that runs no state machine: the run loop's
// txnMachine has checked the framing.
//
// A long run of inserts into one relation is sent with COPY as it streams
// (parallelCopy); other changes go through net-effect compaction
// (compact.go), as a group's do, so that short runs are batched too: the
// net state is written out at the end of every stream block, before a
// savepoint is defined, before a Relation message changes a table it
// holds, and before the commit or prepare. A Stream Abort comes between
// blocks, so the net state is empty then; were it not, it would hold only
// changes made after the newest savepoint, all of the aborted
// subtransaction or of those nested in it, and it is discarded along with
// the ROLLBACK TO SAVEPOINT.
type parallelWorker struct {
	id     int
	origin string
	conn   *pgx.Conn
	ts     *pipeline.Session // the applier's target
	pid    uint32
	a      *applier
	dec    *protocol.Decoder
	jobs   chan pjob
	done   chan struct{}
	// pend is the chunk of changes being filled by the run loop, free the
	// chunks the goroutine is done with (see pchunk).
	pend *pchunk
	free chan *pchunk

	// busy: a transaction is assigned (run loop only).
	busy bool
	// xid is the transaction applied, subs the subtransactions that have a
	// savepoint, innermost last (worker goroutine only).
	xid  uint32
	subs []uint32
	// cp is the run of inserts being copied (worker goroutine only).
	cp parallelCopy
	// failed is set once the transaction failed (by the goroutine, or by
	// lockWatch); err says why.
	failed atomic.Bool
	mu     sync.Mutex
	err    error
}

// newParallelWorker connects worker id and sets its session up like the
// main one's, with its own origin.
func newParallelWorker(ctx context.Context, cfg *Config, main *applier, id int) (*parallelWorker, error) {
	origin := parallelOriginName(cfg.Name, id)
	conn, err := connectTarget(ctx, cfg, "parallel "+strconv.Itoa(id))
	if err != nil {
		return nil, err
	}
	if err := state.EnsureOrigin(ctx, conn, origin); err != nil {
		conn.Close(ctx)
		return nil, err
	}
	sess := pipeline.New(conn)
	if err := sess.Setup(ctx, origin); err != nil {
		conn.Close(ctx)
		return nil, err
	}
	dec, err := protocol.NewDecoder(replayDecoderOptions)
	if err != nil {
		conn.Close(ctx)
		return nil, err
	}
	wa := newApplier(main.log.With().Int("worker", id).Logger(), sess, main.rels.Binary, 0)
	wa.name, wa.policies = main.name, main.policies
	// The machine stays "inside a transaction", for changeNet.
	wa.compaction, wa.grouping, wa.machine.state = !cfg.NoCompaction, true, stateInTxn
	wa.tp = twoPhaseState{on: main.tp.on, mode: main.tp.mode, name: main.tp.name, cfg: main.tp.cfg, prepared: map[string]bool{}}
	w := &parallelWorker{id: id, origin: origin, conn: conn, ts: sess, pid: conn.PgConn().PID(), a: wa, dec: dec,
		jobs: make(chan pjob, workerQueue), done: make(chan struct{}), free: make(chan *pchunk, workerQueue+2)}
	go w.run(context.WithoutCancel(ctx))
	return w, nil
}

// check returns a fallback error once the worker's transaction failed.
func (w *parallelWorker) check() error {
	if !w.failed.Load() {
		return nil
	}
	return &parallelFallbackError{xid: w.xidNow(), reason: w.failure()}
}

func (w *parallelWorker) failure() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		return errors.New("failed")
	}
	return w.err
}

func (w *parallelWorker) xidNow() uint32 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.xid
}

// fail records the first failure of the transaction.
func (w *parallelWorker) fail(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	w.mu.Unlock()
	w.failed.Store(true)
}

// close stops the goroutine and the connection; an open transaction rolls
// back with it. A statement still running (waiting for a lock of a
// connection closed before) is cancelled; a goroutine that does not end
// even then is left behind, with its connection, rather than block the end
// of the session.
func (w *parallelWorker) close() {
	close(w.jobs)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	select {
	case <-w.done:
	case <-time.After(100 * time.Millisecond):
		w.fail(errors.New("the session ended"))
		_ = w.conn.PgConn().CancelRequest(ctx)
		select {
		case <-w.done:
		case <-ctx.Done():
			return
		}
	}
	w.conn.Close(ctx)
}

// mergeStats adds the worker's counters to the applier's.
func (w *parallelWorker) mergeStats(st *Stats) {
	ws := &w.a.Stats
	st.Inserts.Add(ws.Inserts.Swap(0))
	st.CopiedRows.Add(ws.CopiedRows.Swap(0))
	st.Updates.Add(ws.Updates.Swap(0))
	st.Deletes.Add(ws.Deletes.Swap(0))
	st.Truncates.Add(ws.Truncates.Swap(0))
	st.MissingRows.Add(ws.MissingRows.Swap(0))
	ws.Conflicts.mu.Lock()
	n := ws.Conflicts.n
	ws.Conflicts.n = nil
	ws.Conflicts.mu.Unlock()
	for kind, k := range n {
		st.Conflicts.mu.Lock()
		if st.Conflicts.n == nil {
			st.Conflicts.n = map[string]int64{}
		}
		st.Conflicts.n[kind] += k
		st.Conflicts.mu.Unlock()
	}
}

// run is the worker's goroutine.
func (w *parallelWorker) run(ctx context.Context) {
	defer close(w.done)
	for j := range w.jobs {
		err := w.do(ctx, j)
		if j.chunk != nil {
			w.recycle(j.chunk)
		}
		if err != nil && !w.failed.Load() {
			w.fail(err)
			w.ts.Reset()
		}
		if j.reply != nil {
			if err == nil && w.failed.Load() {
				err = w.failure()
			}
			j.reply <- err
		}
		if len(w.jobs) == 0 && !w.failed.Load() && w.xid != 0 {
			// Nothing more at hand: let the target work on what is queued.
			if failed, err := w.a.sess.SendAsync(ctx, nil); err != nil {
				w.fail(w.a.failStmt(ctx, failed, err))
			}
		}
	}
}

// do acts on one job. After a failure only the end of the transaction is
// acted on.
func (w *parallelWorker) do(ctx context.Context, j pjob) error {
	a := w.a
	switch j.kind {
	case jobBegin:
		w.mu.Lock()
		w.xid, w.subs, w.err = j.xid, w.subs[:0], nil
		w.mu.Unlock()
		w.failed.Store(false)
		var discard Stats // what an earlier transaction that did not commit counted
		w.mergeStats(&discard)
		// The commit LSN is known only at Stream Commit; until then 1, a
		// position no transaction has, which lets changeNet compact.
		a.txn = openTxn{xid: j.xid, finalLSN: 1}
		a.queue.TxnXid, a.queue.TxnLSN = j.xid, 0
		a.net = compact.New()
		w.cp.reset()
		a.sess.Begin()
		return nil
	case jobRollback:
		w.cp.reset()
		return w.finish(ctx, a.sess.Rollback(ctx))
	}
	if w.failed.Load() {
		if j.kind == jobCommit || j.kind == jobPrepare {
			return w.finish(ctx, w.failure())
		}
		return nil
	}
	switch j.kind {
	case jobChanges:
		c, start := j.chunk, 0
		for i, end := range c.ends {
			if err := w.change(ctx, c.data[start:end], c.subs[i]); err != nil {
				return err
			}
			start = end
		}
		return nil
	case jobIdle:
		// A run of inserts being copied goes on into the next block (see
		// parallelCopy): ended here, every block of a bulk insert would
		// start a run anew, its first copyMinRun rows as INSERTs and the
		// rest as a COPY of a block's worth.
		if err := a.writeOut(ctx); err != nil { // run sends
			return a.fail(ctx, err)
		}
		return nil
	case jobAbortSub:
		i := slices.Index(w.subs, j.subxid)
		if i < 0 {
			return nil // no change of it reached the worker
		}
		if err := w.endCopy(ctx); err != nil { // rolled back with the rest
			return err
		}
		a.net = compact.New() // see parallelWorker
		a.sess.QueueSQL(pipeline.OpBegin, nil, "ROLLBACK TO SAVEPOINT "+savepointName(j.subxid))
		w.subs = w.subs[:i]
		return nil
	case jobCommit, jobPrepare:
		return w.finish(ctx, w.end(ctx, j))
	}
	return nil
}

// finish frees the worker after its transaction ended, with err.
func (w *parallelWorker) finish(ctx context.Context, err error) error {
	if err != nil && !w.a.sess.Lost() {
		_ = w.a.sess.Rollback(ctx)
	}
	w.mu.Lock()
	w.xid = 0
	w.mu.Unlock()
	return err
}

// savepointName names the savepoint of subtransaction subxid.
func savepointName(subxid uint32) string {
	return sqlgen.QuoteIdent("walapply_" + strconv.FormatUint(uint64(subxid), 10))
}

// change applies one message of a stream block, of subtransaction subxid.
// raw is valid until the chunk holding it is recycled: what is kept of it
// is copied (the batch's encoded statements, the compactor's arena, the
// COPY buffer, the relation cache's strings).
func (w *parallelWorker) change(ctx context.Context, raw []byte, subxid uint32) error {
	a := w.a
	msg, err := w.dec.DecodeStreamedChange(raw)
	if err != nil {
		return &PermanentError{fmt.Errorf("apply: internal error: a streamed change does not decode twice: %w", err)}
	}
	switch m := msg.(type) {
	case *protocol.Relation:
		if m.RelationID == w.cp.rel {
			if err := w.endCopy(ctx); err != nil {
				return err
			}
		}
		if a.net.HasRelation(m.RelationID) {
			if err := a.writeOut(ctx); err != nil {
				return a.fail(ctx, err)
			}
		}
		a.putStreamedRelation(m)
	case *protocol.TypeMessage:
		a.rels.PutType(m)
	case *protocol.Insert, *protocol.Update, *protocol.Delete, *protocol.Truncate:
		if subxid != w.xid && !slices.Contains(w.subs, subxid) {
			if err := w.endCopy(ctx); err != nil {
				return err
			}
			if err := a.writeOut(ctx); err != nil {
				return a.fail(ctx, err)
			}
			a.sess.QueueSQL(pipeline.OpBegin, nil, "SAVEPOINT "+savepointName(subxid))
			w.subs = append(w.subs, subxid)
		}
		if ins, ok := m.(*protocol.Insert); ok {
			if copied, err := w.copyInsert(ctx, ins); copied || err != nil {
				return err
			}
		} else if err := w.endCopy(ctx); err != nil {
			return err
		}
		if err := a.changeNet(ctx, msg); err != nil {
			return a.fail(ctx, err)
		}
		if a.sess.Full() {
			// Sent without waiting: the target executes it while the next
			// changes are compacted (one-deep pipelining, target.go).
			if failed, err := a.sess.SendAsync(ctx, nil); err != nil {
				return a.failStmt(ctx, failed, err)
			}
		}
	}
	return nil
}

// end commits or prepares the transaction, its origin advanced to j.end
// inside it. txid_current gives it an xid, so that it writes a commit
// record (which advances the origin) even if none of its changes wrote.
func (w *parallelWorker) end(ctx context.Context, j pjob) error {
	a := w.a
	a.applied = j.applied // the position a rewind goes back to
	a.txn.finalLSN, a.queue.TxnLSN = j.lsn, j.lsn
	if err := w.endCopy(ctx); err != nil {
		return err
	}
	if err := a.writeOut(ctx); err != nil {
		return a.fail(ctx, err)
	}
	a.sess.QueueSQL(pipeline.OpOrigin, nil, "SELECT pg_catalog.txid_current()")
	if j.kind == jobCommit {
		a.queueOriginAdvance(j.end, j.at)
		a.sess.QueueSQL(pipeline.OpCommit, nil, "COMMIT")
		if failed, err := a.sess.Flush(ctx); err != nil {
			return a.failStmt(ctx, failed, err)
		}
		a.queue.Done = a.queue.Done[:0]
		return nil
	}
	a.tp.gid = j.gid
	a.params = append(state.AppendXactSetupArgs(a.params[:0], j.end, j.at.Time()), []byte(j.gid))
	a.formats = append(a.formats[:0], 0, 0, 0)
	sd, err := a.sess.StatementFor(ctx, state.XactSetupUnlessPreparedSQL, nil)
	if err != nil {
		return a.fail(ctx, err)
	}
	a.sess.QueueStmt(pipeline.OpOrigin, nil, sd, a.params, a.formats, 0, 0)
	a.sess.QueueSQL(pipeline.OpCommit, nil, twophase.PrepareSQL(j.gid))
	if failed, err := a.sess.Flush(ctx); err != nil {
		return a.failPrepare(ctx, failed, err)
	}
	a.queue.Done = a.queue.Done[:0]
	return nil
}
