package engine

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/apply/internal/compact"
	"github.com/walapply/walapply/apply/internal/pipeline"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/state"
	"github.com/walapply/walapply/twophase"
)

// NewWorkerApplier returns worker id's applier, writing through sess on
// conn, set up like main's.
func NewWorkerApplier(main *Applier, id int, sess Target, conn workerConn) (*workerApplier, error) {
	dec, err := protocol.NewDecoder(replayDecoderOptions)
	if err != nil {
		return nil, err
	}
	wcfg := Options{Binary: main.rels.Binary, Grouping: true, Compaction: main.compaction, Name: main.name, Policies: main.policies}
	wa := New(main.log.With().Int("worker", id).Logger(), sess, wcfg, 0)
	// The machine stays "inside a transaction", for changeNet.
	wa.machine.AssumeOrdinary()
	wa.tp = twoPhaseState{on: main.tp.on, mode: main.tp.mode, name: main.tp.name, dial: main.tp.dial, prepared: map[string]bool{}}
	return &workerApplier{a: wa, main: &main.Stats, conn: conn, dec: dec}, nil
}

// workerConn is a worker's connection, as its applier needs it beyond the
// target: PgxWorkerConn, or the transcript tests' fake.
type workerConn interface {
	PID() uint32
	Cancel(ctx context.Context) error
	Close(ctx context.Context)
	// Reset forgets the batch after a failure (pipeline.Session.Reset).
	Reset()
}

// PgxWorkerConn is a worker's pgx connection and the session on it.
type PgxWorkerConn struct {
	conn *pgx.Conn
	sess *pipeline.Session
}

// NewWorkerConn is a worker's connection conn with the session sess on it.
func NewWorkerConn(conn *pgx.Conn, sess *pipeline.Session) *PgxWorkerConn {
	return &PgxWorkerConn{conn: conn, sess: sess}
}

func (c *PgxWorkerConn) PID() uint32                      { return c.conn.PgConn().PID() }
func (c *PgxWorkerConn) Cancel(ctx context.Context) error { return c.conn.PgConn().CancelRequest(ctx) }
func (c *PgxWorkerConn) Close(ctx context.Context)        { c.conn.Close(ctx) }
func (c *PgxWorkerConn) Reset()                           { c.sess.Reset() }

// workerApplier is a parallel worker's applier (parallel.Applier): an
// applier of its own on the worker's connection, with its relation cache,
// prepared statements and batch, that runs no state machine (the run
// loop's Machine has checked the framing). Its methods are the
// applier's, each failure rolled back and named as the applier does.
type workerApplier struct {
	a    *Applier
	main *Stats // the run loop's applier's
	conn workerConn
	dec  *protocol.Decoder
}

func (w *workerApplier) Begin(xid uint32) {
	a := w.a
	// The commit LSN is known only at Stream Commit; until then 1, a
	// position no transaction has, which lets changeNet compact.
	a.txn = openTxn{xid: xid, finalLSN: 1}
	a.queue.TxnXid, a.queue.TxnLSN = xid, 0
	a.net = compact.New()
	a.sess.Begin()
}

func (w *workerApplier) Decode(raw []byte) (protocol.Message, error) {
	msg, err := w.dec.DecodeStreamedChange(raw)
	if err != nil {
		return nil, &PermanentError{Err: fmt.Errorf("apply: internal error: a streamed change does not decode twice: %w", err)}
	}
	return msg, nil
}

func (w *workerApplier) PutRelation(m *protocol.Relation) { w.a.putStreamedRelation(m) }
func (w *workerApplier) PutType(m *protocol.TypeMessage)  { w.a.rels.PutType(m) }
func (w *workerApplier) Holds(rel uint32) bool            { return w.a.net.HasRelation(rel) }
func (w *workerApplier) Discard()                         { w.a.net = compact.New() }
func (w *workerApplier) Full() bool                       { return w.a.sess.Full() }
func (w *workerApplier) MayCopy() bool                    { return w.a.insertsMayCopy() }
func (w *workerApplier) Rollback(ctx context.Context) error {
	return w.a.sess.Rollback(ctx)
}
func (w *workerApplier) Reset()                           { w.conn.Reset() }
func (w *workerApplier) Lost() bool                       { return w.a.sess.Lost() }
func (w *workerApplier) PID() uint32                      { return w.conn.PID() }
func (w *workerApplier) Cancel(ctx context.Context) error { return w.conn.Cancel(ctx) }
func (w *workerApplier) Close(ctx context.Context)        { w.conn.Close(ctx) }

func (w *workerApplier) QueueSQL(op pipeline.Op, sql string) { w.a.sess.QueueSQL(op, nil, sql) }

func (w *workerApplier) Change(ctx context.Context, msg protocol.Message) error {
	if err := w.a.changeNet(ctx, msg); err != nil {
		return w.a.fail(ctx, err)
	}
	return nil
}

func (w *workerApplier) WriteOut(ctx context.Context) error {
	if err := w.a.writeOut(ctx); err != nil {
		return w.a.fail(ctx, err)
	}
	return nil
}

func (w *workerApplier) Send(ctx context.Context) error {
	if failed, err := w.a.sess.SendAsync(ctx, nil); err != nil {
		return w.a.failStmt(ctx, failed, err)
	}
	return nil
}

func (w *workerApplier) Relation(ctx context.Context, rel uint32) (*relmap.Entry, error) {
	e, err := w.a.relation(ctx, rel, pipeline.OpInsert)
	if err != nil {
		return nil, w.a.fail(ctx, err)
	}
	return e, nil
}

func (w *workerApplier) QueueCopy(e *relmap.Entry, sql string, data []byte, rows int64) {
	w.a.sess.QueueCopy(e, sql, data)
	w.a.Stats.Inserts.Add(rows)
	w.a.Stats.CopiedRows.Add(rows)
}

func (w *workerApplier) SetEnd(lsn, applied protocol.LSN) {
	a := w.a
	a.applied = applied // the position a rewind goes back to
	a.txn.finalLSN, a.queue.TxnLSN = lsn, lsn
}

// Commit writes the net state out and commits, the worker's origin
// advanced to end inside the transaction. txid_current gives it an xid, so
// that it writes a commit record (which advances the origin) even if none
// of its changes wrote.
func (w *workerApplier) Commit(ctx context.Context, end protocol.LSN, at protocol.Timestamp) error {
	a := w.a
	if err := a.writeOut(ctx); err != nil {
		return a.fail(ctx, err)
	}
	a.sess.QueueSQL(pipeline.OpOrigin, nil, "SELECT pg_catalog.txid_current()")
	a.queueOriginAdvance(end, at)
	a.sess.QueueSQL(pipeline.OpCommit, nil, "COMMIT")
	if failed, err := a.sess.Flush(ctx); err != nil {
		return a.failStmt(ctx, failed, err)
	}
	a.queue.Done = a.queue.Done[:0]
	return nil
}

// Prepare is Commit with PREPARE TRANSACTION gid, the origin advanced
// unless gid is already prepared (state.XactSetupUnlessPreparedSQL).
func (w *workerApplier) Prepare(ctx context.Context, end protocol.LSN, at protocol.Timestamp, gid string) error {
	a := w.a
	if err := a.writeOut(ctx); err != nil {
		return a.fail(ctx, err)
	}
	a.sess.QueueSQL(pipeline.OpOrigin, nil, "SELECT pg_catalog.txid_current()")
	a.tp.gid = gid
	a.params = append(state.AppendXactSetupArgs(a.params[:0], end, at.Time()), []byte(gid))
	a.formats = append(a.formats[:0], 0, 0, 0)
	sd, err := a.sess.StatementFor(ctx, state.XactSetupUnlessPreparedSQL, nil)
	if err != nil {
		return a.fail(ctx, err)
	}
	a.sess.QueueStmt(pipeline.OpOrigin, nil, sd, a.params, a.formats, 0, 0)
	a.sess.QueueSQL(pipeline.OpCommit, nil, twophase.PrepareSQL(gid))
	if failed, err := a.sess.Flush(ctx); err != nil {
		return a.failPrepare(ctx, failed, err)
	}
	a.queue.Done = a.queue.Done[:0]
	return nil
}

// MoveStats adds the worker's counters to the run loop's applier's.
func (w *workerApplier) MoveStats() { moveStats(&w.a.Stats, w.main) }

// DropStats forgets what an earlier transaction that did not commit
// counted.
func (w *workerApplier) DropStats() {
	var discard Stats
	moveStats(&w.a.Stats, &discard)
}
