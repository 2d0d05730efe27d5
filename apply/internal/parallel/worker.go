package parallel

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/walapply/walapply/apply/internal/pipeline"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/protocol"
)

// Worker applies one streamed transaction at a time on a target connection
// of its own, through its Applier, on a goroutine fed by the run loop
// through jobs (see the package doc).
//
// A long run of inserts into one relation is sent with COPY as it streams
// (copyRun); other changes go through net-effect compaction, as a group's
// do, so that short runs are batched too: the net state is written out at
// the end of every stream block, before a savepoint is defined, before a
// Relation message changes a table it holds, and before the commit or
// prepare. A Stream Abort comes between blocks, so the net state is empty
// then; were it not, it would hold only changes made after the newest
// savepoint, all of the aborted subtransaction or of those nested in it,
// and it is discarded along with the ROLLBACK TO SAVEPOINT.
type Worker struct {
	id   int
	app  Applier
	pid  uint32
	jobs chan job
	done chan struct{}
	// pend is the chunk of changes being filled by the run loop, free the
	// chunks the goroutine is done with (see chunk).
	pend *chunk
	free chan *chunk
	// minRun is the length from which a run of inserts goes by COPY.
	minRun int

	// busy: a transaction is assigned (run loop only).
	busy bool
	// xid is the transaction applied, subs the subtransactions that have a
	// savepoint, innermost last (worker goroutine only).
	xid  uint32
	subs []uint32
	// cp is the run of inserts being copied (worker goroutine only).
	cp copyRun
	// failed is set once the transaction failed (by the goroutine, or by
	// Watch); err says why.
	failed atomic.Bool
	mu     sync.Mutex
	err    error
}

// newWorker starts worker id's goroutine on app.
func newWorker(ctx context.Context, id int, app Applier, minRun int) *Worker {
	w := &Worker{id: id, app: app, pid: app.PID(), minRun: minRun,
		jobs: make(chan job, workerQueue), done: make(chan struct{}), free: make(chan *chunk, workerQueue+2)}
	go w.run(context.WithoutCancel(ctx))
	return w
}

// ID is the worker's number, from 1.
func (w *Worker) ID() int { return w.id }

// Copies counts the COPYs sent for the transaction; the run loop reads it
// once the commit's reply is in.
func (w *Worker) Copies() int { return w.cp.copies }

// MoveStats adds the worker's counters to the run loop's applier's (after
// its commit or prepare replied).
func (w *Worker) MoveStats() { w.app.MoveStats() }

// Check returns a FallbackError once the worker's transaction failed.
func (w *Worker) Check() error {
	if !w.failed.Load() {
		return nil
	}
	return &FallbackError{Xid: w.xidNow(), Reason: w.failure()}
}

func (w *Worker) failure() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		return errors.New("failed")
	}
	return w.err
}

func (w *Worker) xidNow() uint32 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.xid
}

// fail records the first failure of the transaction.
func (w *Worker) fail(err error) {
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
func (w *Worker) close() {
	close(w.jobs)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	select {
	case <-w.done:
	case <-time.After(100 * time.Millisecond):
		w.fail(errors.New("the session ended"))
		_ = w.app.Cancel(ctx)
		select {
		case <-w.done:
		case <-ctx.Done():
			return
		}
	}
	w.app.Close(ctx)
}

// run is the worker's goroutine.
func (w *Worker) run(ctx context.Context) {
	defer close(w.done)
	for j := range w.jobs {
		err := w.do(ctx, j)
		if j.chunk != nil {
			w.recycle(j.chunk)
		}
		if err != nil && !w.failed.Load() {
			w.fail(err)
			w.app.Reset()
		}
		if j.reply != nil {
			if err == nil && w.failed.Load() {
				err = w.failure()
			}
			j.reply <- err
		}
		if len(w.jobs) == 0 && !w.failed.Load() && w.xid != 0 {
			// Nothing more at hand: let the target work on what is queued.
			if err := w.app.Send(ctx); err != nil {
				w.fail(err)
			}
		}
	}
}

// do acts on one job. After a failure only the end of the transaction is
// acted on.
func (w *Worker) do(ctx context.Context, j job) error {
	switch j.kind {
	case jobBegin:
		w.mu.Lock()
		w.xid, w.subs, w.err = j.xid, w.subs[:0], nil
		w.mu.Unlock()
		w.failed.Store(false)
		w.app.DropStats() // what an earlier transaction that did not commit counted
		w.app.Begin(j.xid)
		w.cp.reset()
		return nil
	case jobRollback:
		w.cp.reset()
		return w.finish(ctx, w.app.Rollback(ctx))
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
		// copyRun): ended here, every block of a bulk insert would start a
		// run anew, its first minRun rows as INSERTs and the rest as a
		// COPY of a block's worth.
		return w.app.WriteOut(ctx) // run sends
	case jobAbortSub:
		i := slices.Index(w.subs, j.subxid)
		if i < 0 {
			return nil // no change of it reached the worker
		}
		if err := w.endCopy(ctx); err != nil { // rolled back with the rest
			return err
		}
		w.app.Discard() // see Worker
		w.app.QueueSQL(pipeline.OpBegin, "ROLLBACK TO SAVEPOINT "+savepointName(j.subxid))
		w.subs = w.subs[:i]
		return nil
	case jobCommit, jobPrepare:
		return w.finish(ctx, w.end(ctx, j))
	}
	return nil
}

// finish frees the worker after its transaction ended, with err.
func (w *Worker) finish(ctx context.Context, err error) error {
	if err != nil && !w.app.Lost() {
		_ = w.app.Rollback(ctx)
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
func (w *Worker) change(ctx context.Context, raw []byte, subxid uint32) error {
	a := w.app
	msg, err := a.Decode(raw)
	if err != nil {
		return err
	}
	switch m := msg.(type) {
	case *protocol.Relation:
		if m.RelationID == w.cp.rel {
			if err := w.endCopy(ctx); err != nil {
				return err
			}
		}
		if a.Holds(m.RelationID) {
			if err := a.WriteOut(ctx); err != nil {
				return err
			}
		}
		a.PutRelation(m)
	case *protocol.TypeMessage:
		a.PutType(m)
	case *protocol.Insert, *protocol.Update, *protocol.Delete, *protocol.Truncate:
		if subxid != w.xid && !slices.Contains(w.subs, subxid) {
			if err := w.endCopy(ctx); err != nil {
				return err
			}
			if err := a.WriteOut(ctx); err != nil {
				return err
			}
			a.QueueSQL(pipeline.OpBegin, "SAVEPOINT "+savepointName(subxid))
			w.subs = append(w.subs, subxid)
		}
		if ins, ok := m.(*protocol.Insert); ok {
			if copied, err := w.copyInsert(ctx, ins); copied || err != nil {
				return err
			}
		} else if err := w.endCopy(ctx); err != nil {
			return err
		}
		if err := a.Change(ctx, msg); err != nil {
			return err
		}
		if a.Full() {
			// Sent without waiting: the target executes it while the next
			// changes are compacted (one-deep pipelining).
			return a.Send(ctx)
		}
	}
	return nil
}

// end commits or prepares the transaction, its origin advanced to j.end
// inside it.
func (w *Worker) end(ctx context.Context, j job) error {
	w.app.SetEnd(j.lsn, j.applied)
	if err := w.endCopy(ctx); err != nil {
		return err
	}
	if j.kind == jobCommit {
		return w.app.Commit(ctx, j.end, j.at)
	}
	return w.app.Prepare(ctx, j.end, j.at, j.gid)
}
