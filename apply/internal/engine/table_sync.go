package engine

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/walapply/walapply/apply/internal/initcopy"
	"github.com/walapply/walapply/apply/internal/pipeline"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/protocol"
)

// maxSyncBuffer bounds the changes set aside for the tables being copied.
const maxSyncBuffer = 16 << 20

// TableSync is a table being copied in the background.
//
// A table found in the stream, copied while the session goes on applying
// the other tables.
//
// When the stream's first Relation message names a published table X the
// applier has not copied (table_watch.go), the session does not stop: it
// records X 'pending', copies it in the background in a snapshot S of its
// own (a temporary slot's, at L), and meanwhile sets aside X's changes
// from the stream, unapplied, while it applies the other tables' changes
// as before. The copy commits X's rows with X 'copied'. At the next
// transaction boundary the session catches X up, in one target
// transaction: it applies the set-aside changes that S does not hold (the
// rule of CopyFilter: a change of a transaction that committed before
// L and is visible in S is in the copy), turns X 'done', and records the
// origin at the last source transaction the session has applied, A. From
// then on X is filtered by the copy filter with L and S like any table
// copied in a later snapshot, because the stream may still be behind L.
//
// Why that is exact. Every change to X after the first Relation message is
// either set aside (until the catch-up) or applied through the filter
// (after it); none before it exists in this session, because pgoutput
// sends the Relation message before the first change. The set-aside
// changes are those of the transactions up to A, and those after A come
// after the catch-up; the origin's advance to A, in the catch-up's
// transaction, is no move (the origin is at A already) but makes the
// catch-up and X's 'done' one fact with the position they hold for.
// A crash before the catch-up commits leaves X 'pending' or 'copied' with
// none of its stream changes applied: the next start empties a 'copied'
// table and copies it again (apply/refresh.go), which is exact by the argument
// there, since nothing of X came from the stream. After the catch-up, X
// is 'done' and its changes up to A are applied, and the origin is at A
// or later: the stream resends nothing of them.
//
// The cases this does not cover fall back to ending the session, as
// before (NewTablesError; the next start copies X before streaming): a
// change to X in a streamed or a prepared transaction, a TRUNCATE that
// names X, X's definition changing meanwhile, a second table found while
// one is being copied, and more than maxSyncBuffer bytes of changes set
// aside (memory stays bounded).
type TableSync struct {
	name    sqlgen.Rel
	table   *initcopy.Table
	changes []syncChange // set aside, in stream order
	done    chan error   // the copy's result, once
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// StartTableSync starts copy, table t's (named n) copy in the
// background, under a context of its own that ctx's cancellation does not
// reach (the TableSync's stop cancels it).
func StartTableSync(ctx context.Context, n sqlgen.Rel, t *initcopy.Table, copy func(ctx context.Context) error) *TableSync {
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ts := &TableSync{name: n, table: t, done: make(chan error, 1), cancel: cancel}
	ts.wg.Add(1)
	go func() {
		defer ts.wg.Done()
		ts.done <- copy(cctx)
	}()
	return ts
}

// Name is the table's name.
func (ts *TableSync) Name() sqlgen.Rel { return ts.name }

// Table is the table being copied.
func (ts *TableSync) Table() *initcopy.Table { return ts.table }

// Changes is the number of changes set aside.
func (ts *TableSync) Changes() int { return len(ts.changes) }

// Wait waits for the background copy's goroutine to end.
func (ts *TableSync) Wait() { ts.wg.Wait() }

// ReadySync returns a table whose background copy finished, to be caught
// up (CatchUp), when the applier is at a transaction boundary; nil when
// there is none or it is not at one.
func (a *Applier) ReadySync() (*TableSync, error) {
	w := a.watch
	if w == nil || len(w.syncs.tables) == 0 || a.InTransaction() || a.InStreamBlock() {
		return nil, nil
	}
	return w.ready()
}

// syncChange is one change set aside: the message as received and the
// source transaction it belongs to.
type syncChange struct {
	raw      []byte
	xid      uint32
	finalLSN protocol.LSN
}

// syncs are the tables being copied in the background.
type syncs struct {
	tables map[sqlgen.Rel]*TableSync
	bytes  int
	// start begins a table's background copy (session.startSync); nil
	// when the applier cannot (no session, as in unit tests).
	start func(ctx context.Context, n sqlgen.Rel) (*TableSync, error)
}

// begin starts X's background copy, or says to end the session.
func (w *TableWatch) begin(ctx context.Context, a *Applier, n sqlgen.Rel) error {
	// One background copy at a time: its temporary slot is named after
	// the applier's.
	if w.syncs.start == nil || len(w.syncs.tables) > 0 || a.machine.InStreamBlock() || a.machine.InPrepare() {
		return &NewTablesError{Tables: []sqlgen.Rel{n}}
	}
	ts, err := w.syncs.start(ctx, n)
	if err != nil {
		return err
	}
	if ts == nil {
		return &NewTablesError{Tables: []sqlgen.Rel{n}}
	}
	if w.syncs.tables == nil {
		w.syncs.tables = map[sqlgen.Rel]*TableSync{}
	}
	w.syncs.tables[n] = ts
	w.known[n] = true
	return nil
}

// syncing returns the background copy relation relid is in, if any.
func (w *TableWatch) syncing(a *Applier, relid uint32) *TableSync {
	if w == nil || len(w.syncs.tables) == 0 {
		return nil
	}
	e := a.rels.Rels[relid]
	if e == nil {
		return nil
	}
	return w.syncs.tables[sqlgen.Rel{Schema: relmap.SourceSchema(e.Rel.Namespace), Name: e.Rel.Name}]
}

// touches returns the background copy a change's table is in, and
// whether the change is a TRUNCATE.
func (w *TableWatch) touches(a *Applier, msg protocol.Message) (*TableSync, bool) {
	if w == nil || len(w.syncs.tables) == 0 {
		return nil, false
	}
	switch m := msg.(type) {
	case *protocol.Insert:
		return w.syncing(a, m.RelationID), false
	case *protocol.Update:
		return w.syncing(a, m.RelationID), false
	case *protocol.Delete:
		return w.syncing(a, m.RelationID), false
	case *protocol.Truncate:
		for _, id := range m.RelationIDs {
			if ts := w.syncing(a, id); ts != nil {
				return ts, true
			}
		}
	}
	return nil, false
}

// divert sets a change aside when its table is being copied; it reports
// whether it did.
func (w *TableWatch) divert(a *Applier, msg protocol.Message) (bool, error) {
	ts, truncate := w.touches(a, msg)
	if ts == nil {
		return false, nil
	}
	if truncate || a.machine.InPrepare() || w.syncs.bytes+len(a.stream.raw) > maxSyncBuffer {
		return false, &NewTablesError{Tables: []sqlgen.Rel{ts.name}}
	}
	ts.changes = append(ts.changes, syncChange{raw: slices.Clone(a.stream.raw), xid: a.txn.xid, finalLSN: a.txn.finalLSN})
	w.syncs.bytes += len(a.stream.raw)
	return true, nil
}

// relationChanged reports whether a Relation message changes the
// definition of a table being copied: its set-aside changes were made
// with the old one.
func (w *TableWatch) relationChanged(a *Applier, rel *protocol.Relation) error {
	if w == nil || len(w.syncs.tables) == 0 {
		return nil
	}
	n := sqlgen.Rel{Schema: relmap.SourceSchema(rel.Namespace), Name: rel.Name}
	if w.syncs.tables[n] == nil {
		return nil
	}
	if e := a.rels.Rels[rel.RelationID]; e != nil && !sameRelation(e.Rel, rel) {
		return &NewTablesError{Tables: []sqlgen.Rel{n}}
	}
	return nil
}

// ready returns a table whose copy finished, or an error of one that
// failed.
func (w *TableWatch) ready() (*TableSync, error) {
	if w == nil {
		return nil, nil
	}
	for _, ts := range w.syncs.tables {
		select {
		case err := <-ts.done:
			if err != nil {
				return nil, err
			}
			return ts, nil
		default:
		}
	}
	return nil, nil
}

// stop cancels the background copies and waits for them.
func (w *TableWatch) stop() {
	if w == nil {
		return
	}
	for _, ts := range w.syncs.tables {
		ts.cancel()
		ts.wg.Wait()
	}
}

// CatchUp applies ts's set-aside changes that its copy ct does not hold,
// decoded with dec, and turns the table 'done' in walapply.copy_state of
// applier name, in one target transaction; the applier is at a
// transaction boundary with nothing in flight. It returns how many
// changes the copy held.
func (a *Applier) CatchUp(ctx context.Context, ts *TableSync, ct *CopiedTable, dec *protocol.Decoder, name string) (skipped int, err error) {
	applied, at := a.Applied()
	a.queue.TxnXid, a.queue.TxnLSN = 0, applied
	a.sess.Begin()
	for _, c := range ts.changes {
		if ct.Holds(c.xid, c.finalLSN) {
			skipped++
			continue
		}
		msg, err := dec.Decode(c.raw)
		if err != nil {
			return skipped, fmt.Errorf("decoding a set-aside change of table %s: %w", ts.table, err)
		}
		a.txn = openTxn{xid: c.xid, finalLSN: c.finalLSN}
		a.queue.TxnXid, a.queue.TxnLSN = c.xid, c.finalLSN
		if err := a.change(ctx, msg); err != nil {
			return skipped, a.fail(ctx, err)
		}
		if a.sess.Full() {
			if failed, err := a.sess.Flush(ctx); err != nil {
				return skipped, a.failStmt(ctx, failed, err)
			}
		}
	}
	a.txn = openTxn{}
	a.sess.QueueExec(pipeline.Stmt{Op: pipeline.OpOrigin}, `UPDATE walapply.copy_state SET status = 'done'
		WHERE applier = $1 AND schema_name = $2 AND table_name = $3 AND status = 'copied'`,
		[][]byte{[]byte(name), []byte(ts.name.Schema), []byte(ts.name.Name)}, nil, nil)
	a.queueOriginAdvance(applied, at)
	a.sess.QueueSQL(pipeline.OpCommit, nil, "COMMIT")
	if failed, err := a.sess.Flush(ctx); err != nil {
		return skipped, a.failStmt(ctx, failed, err)
	}
	if a.copied == nil {
		a.copied = NewCopyFilter()
	}
	a.copied.Add(ts.name, ct)
	w := a.watch
	for _, c := range ts.changes {
		w.syncs.bytes -= len(c.raw)
	}
	delete(w.syncs.tables, ts.name)
	return skipped, nil
}
