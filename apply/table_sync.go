package apply

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/walapply/walapply/apply/internal/engine"
	"github.com/walapply/walapply/apply/internal/initcopy"
	"github.com/walapply/walapply/apply/internal/pipeline"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/protocol"
)

// maxSyncBuffer bounds the changes set aside for the tables being copied.
const maxSyncBuffer = 16 << 20

// tableSync is a table being copied in the background.
//
// A table found in the stream, copied while the session goes on applying
// the other tables.
//
// When the stream's first Relation message names a published table X the
// applier has not copied (refresh.go), the session does not stop: it
// records X 'pending', copies it in the background in a snapshot S of its
// own (a temporary slot's, at L), and meanwhile sets aside X's changes
// from the stream, unapplied, while it applies the other tables' changes
// as before. The copy commits X's rows with X 'copied'. At the next
// transaction boundary the session catches X up, in one target
// transaction: it applies the set-aside changes that S does not hold (the
// rule of engine.CopyFilter: a change of a transaction that committed before
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
// table and copies it again (refresh.go), which is exact by the argument
// there, since nothing of X came from the stream. After the catch-up, X
// is 'done' and its changes up to A are applied, and the origin is at A
// or later: the stream resends nothing of them.
//
// The cases this does not cover fall back to ending the session, as
// before (newTablesError; the next start copies X before streaming): a
// change to X in a streamed or a prepared transaction, a TRUNCATE that
// names X, X's definition changing meanwhile, a second table found while
// one is being copied, and more than maxSyncBuffer bytes of changes set
// aside (memory stays bounded).
type tableSync struct {
	name    sqlgen.Rel
	table   *initcopy.Table
	changes []syncChange // set aside, in stream order
	done    chan error   // the copy's result, once
	cancel  context.CancelFunc
	wg      sync.WaitGroup
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
	tables map[sqlgen.Rel]*tableSync
	bytes  int
	// start begins a table's background copy (session.startSync); nil
	// when the applier cannot (no session, as in unit tests).
	start func(ctx context.Context, n sqlgen.Rel) (*tableSync, error)
}

// begin starts X's background copy, or says to end the session.
func (w *tableWatch) begin(ctx context.Context, a *applier, n sqlgen.Rel) error {
	// One background copy at a time: its temporary slot is named after
	// the applier's.
	if w.syncs.start == nil || len(w.syncs.tables) > 0 || a.machine.InStreamBlock() || a.machine.InPrepare() {
		return &newTablesError{tables: []sqlgen.Rel{n}}
	}
	ts, err := w.syncs.start(ctx, n)
	if err != nil {
		return err
	}
	if ts == nil {
		return &newTablesError{tables: []sqlgen.Rel{n}}
	}
	if w.syncs.tables == nil {
		w.syncs.tables = map[sqlgen.Rel]*tableSync{}
	}
	w.syncs.tables[n] = ts
	w.known[n] = true
	return nil
}

// syncing returns the background copy relation relid is in, if any.
func (w *tableWatch) syncing(a *applier, relid uint32) *tableSync {
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
func (w *tableWatch) touches(a *applier, msg protocol.Message) (*tableSync, bool) {
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
func (w *tableWatch) divert(a *applier, msg protocol.Message) (bool, error) {
	ts, truncate := w.touches(a, msg)
	if ts == nil {
		return false, nil
	}
	if truncate || a.machine.InPrepare() || w.syncs.bytes+len(a.stream.raw) > maxSyncBuffer {
		return false, &newTablesError{tables: []sqlgen.Rel{ts.name}}
	}
	ts.changes = append(ts.changes, syncChange{raw: slices.Clone(a.stream.raw), xid: a.txn.xid, finalLSN: a.txn.finalLSN})
	w.syncs.bytes += len(a.stream.raw)
	return true, nil
}

// relationChanged reports whether a Relation message changes the
// definition of a table being copied: its set-aside changes were made
// with the old one.
func (w *tableWatch) relationChanged(a *applier, rel *protocol.Relation) error {
	if w == nil || len(w.syncs.tables) == 0 {
		return nil
	}
	n := sqlgen.Rel{Schema: relmap.SourceSchema(rel.Namespace), Name: rel.Name}
	if w.syncs.tables[n] == nil {
		return nil
	}
	if e := a.rels.Rels[rel.RelationID]; e != nil && !sameRelation(e.Rel, rel) {
		return &newTablesError{tables: []sqlgen.Rel{n}}
	}
	return nil
}

// ready returns a table whose copy finished, or an error of one that
// failed.
func (w *tableWatch) ready() (*tableSync, error) {
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
func (w *tableWatch) stop() {
	if w == nil {
		return
	}
	for _, ts := range w.syncs.tables {
		ts.cancel()
		ts.wg.Wait()
	}
}

// catchUp applies ts's set-aside changes that its copy ct does not hold,
// decoded with dec, and turns the table 'done' in walapply.copy_state of
// applier name, in one target transaction; the applier is at a
// transaction boundary with nothing in flight. It returns how many
// changes the copy held.
func (a *applier) catchUp(ctx context.Context, ts *tableSync, ct *engine.CopiedTable, dec *protocol.Decoder, name string) (skipped int, err error) {
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
		a.copied = engine.NewCopyFilter()
	}
	a.copied.Add(ts.name, ct)
	w := a.watch
	for _, c := range ts.changes {
		w.syncs.bytes -= len(c.raw)
	}
	delete(w.syncs.tables, ts.name)
	return skipped, nil
}
