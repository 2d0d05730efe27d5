package engine

import (
	"context"

	"github.com/walapply/walapply/apply/internal/compact"
	"github.com/walapply/walapply/apply/internal/pipeline"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/protocol"
)

// changeNet folds a change into the net state of the group when that is
// safe (internal/compact), and otherwise queues it as it comes.
func (a *Applier) changeNet(ctx context.Context, msg protocol.Message) error {
	if !a.compaction || !a.grouping || !a.machine.InOrdinary() || a.txn.finalLSN <= a.noGroupThrough {
		return a.change(ctx, msg)
	}
	relid, ok := protocol.RowRelation(msg)
	if !ok { // TRUNCATE: everything pending goes first
		if err := a.writeOut(ctx); err != nil {
			return err
		}
		return a.change(ctx, msg)
	}
	e, err := a.relation(ctx, relid, opOf(msg.Type()))
	if err != nil {
		return err
	}
	if !compactable(e, a.policies) {
		// Applied in order; other tables' pending rows may come later,
		// which nothing can tell apart on the replica session.
		return a.change(ctx, msg)
	}
	if a.net.Add(e, msg) {
		if a.net.N >= compact.MaxRows || len(a.net.Arena) >= pipeline.MaxBatchBytes {
			return a.writeOut(ctx)
		}
		return nil
	}
	if err := a.writeOut(ctx); err != nil {
		return err
	}
	return a.change(ctx, msg)
}

// change queues one DML message.
func (a *Applier) change(ctx context.Context, msg protocol.Message) error {
	switch m := msg.(type) {
	case *protocol.Insert:
		return a.insert(ctx, m)
	case *protocol.Update:
		return a.update(ctx, m)
	case *protocol.Delete:
		return a.delete(ctx, m)
	case *protocol.Truncate:
		return a.truncate(ctx, m)
	}
	return OrderError("unexpected change message %s", msg.Type())
}

// checkWidth checks that a tuple of an op's message (which: "new" or
// "old"; "" for an INSERT's only one) has its Relation message's width.
func checkWidth(e *relmap.Entry, t *protocol.TupleData, op pipeline.Op, which string) error {
	if len(t.Columns) != len(e.Rel.Columns) {
		if which != "" {
			which += " "
		}
		return OrderError("%s on %s: its %stuple has %d columns, its Relation message %d", op, e, which, len(t.Columns), len(e.Rel.Columns))
	}
	return nil
}

// addParam appends one column value as a statement parameter.
func (a *Applier) addParam(c *protocol.TupleColumn) {
	switch c.Kind {
	case protocol.ColumnText:
		a.params = append(a.params, c.Data)
		a.formats = append(a.formats, 0)
	case protocol.ColumnBinary:
		a.params = append(a.params, c.Data)
		a.formats = append(a.formats, 1)
	default: // NULL, or an unchanged TOAST value in an INSERT (treated as NULL, as PostgreSQL does)
		a.params = append(a.params, nil)
		a.formats = append(a.formats, 0)
	}
}

func (a *Applier) insert(ctx context.Context, m *protocol.Insert) error {
	e, err := a.relation(ctx, m.RelationID, pipeline.OpInsert)
	if err != nil {
		return err
	}
	if err := checkWidth(e, &m.New, pipeline.OpInsert, ""); err != nil {
		return err
	}
	a.params, a.formats = a.params[:0], a.formats[:0]
	for i := range e.Rel.Columns {
		if e.Tcol[i] >= 0 {
			a.addParam(&m.New.Columns[i])
		}
	}
	sd, err := a.statement(ctx, e, 'I', nil, nil, false)
	if err != nil {
		return err
	}
	keyStart := len(a.queue.Keys)
	if c, _ := a.wraps('I'); c != "" {
		a.queue.Keys = a.renderTupleKey(a.queue.Keys, e, &m.New)
	}
	a.queueRow(pipeline.OpInsert, 'I', e, sd, keyStart)
	a.Stats.Inserts.Add(1)
	return nil
}

// locator returns the tuple that locates the row of an UPDATE or DELETE:
// the old key ('K') or old row ('O') when sent, else the new tuple (the key
// did not change). It also says whether the identity is FULL.
func (a *Applier) locator(e *relmap.Entry, op pipeline.Op, oldKind byte, old, new *protocol.TupleData) (*protocol.TupleData, bool, error) {
	full := e.Rel.ReplicaIdentity == protocol.ReplicaIdentityFull
	if !full && len(e.Key) == 0 {
		return nil, false, &TxnError{Xid: a.txn.xid, CommitLSN: a.txn.finalLSN, Relation: e.String(), Op: op.String(),
			Err: &SchemaError{Relation: e.String(), Problem: "the source relation has no replica identity, so its rows cannot be located",
				Hint: "give the source table a primary key or REPLICA IDENTITY FULL"}}
	}
	src := new
	if oldKind != 0 {
		src = old
	}
	if err := checkWidth(e, src, op, "old"); err != nil {
		return nil, false, err
	}
	return src, full, nil
}

func (a *Applier) update(ctx context.Context, m *protocol.Update) error {
	e, err := a.relation(ctx, m.RelationID, pipeline.OpUpdate)
	if err != nil {
		return err
	}
	if err := checkWidth(e, &m.New, pipeline.OpUpdate, "new"); err != nil {
		return err
	}
	src, full, err := a.locator(e, pipeline.OpUpdate, m.OldKind, &m.Old, &m.New)
	if err != nil {
		return err
	}
	kind := byte('U')
	if a.policies[ConflictUpdateExists] != PolicyError && keyMoves(e, m) {
		if err := a.queueUpdateExists(ctx, e, m); err != nil {
			return err
		}
		if a.policies[ConflictUpdateExists] == PolicySkip {
			kind = 'G'
		}
	}
	a.params, a.formats = a.params[:0], a.formats[:0]
	for i := range e.Rel.Columns {
		if e.Tcol[i] >= 0 && m.New.Columns[i].Kind != protocol.ColumnUnchanged {
			a.addParam(&m.New.Columns[i])
		}
	}
	keyStart := len(a.queue.Keys)
	match := a.matchColumns(e, src, full)
	if kind == 'G' {
		for _, i := range e.Key {
			a.addParam(&m.New.Columns[i])
		}
	}
	sd, err := a.statement(ctx, e, kind, &m.New, match, full)
	if err != nil {
		return err
	}
	a.queueRow(pipeline.OpUpdate, kind, e, sd, keyStart)
	a.Stats.Updates.Add(1)
	return nil
}

func (a *Applier) delete(ctx context.Context, m *protocol.Delete) error {
	e, err := a.relation(ctx, m.RelationID, pipeline.OpDelete)
	if err != nil {
		return err
	}
	src, full, err := a.locator(e, pipeline.OpDelete, m.OldKind, &m.Old, &m.Old)
	if err != nil {
		return err
	}
	a.params, a.formats = a.params[:0], a.formats[:0]
	keyStart := len(a.queue.Keys)
	match := a.matchColumns(e, src, full)
	sd, err := a.statement(ctx, e, 'D', nil, match, full)
	if err != nil {
		return err
	}
	a.queueRow(pipeline.OpDelete, 'D', e, sd, keyStart)
	a.Stats.Deletes.Add(1)
	return nil
}

// matchColumns appends the locating values to the parameters, renders the
// key for messages, and returns which source columns locate the row.
func (a *Applier) matchColumns(e *relmap.Entry, src *protocol.TupleData, full bool) []int {
	use := a.matchIdx[:0]
	if full {
		for i := range e.Rel.Columns {
			if e.Tcol[i] >= 0 && src.Columns[i].Kind != protocol.ColumnUnchanged {
				use = append(use, i)
			}
		}
	} else {
		use = append(use, e.Key...)
	}
	keys := a.queue.Keys
	for n, i := range use {
		c := &src.Columns[i]
		a.addParam(c)
		if n > 0 {
			keys = append(keys, ", "...)
		}
		keys = append(keys, e.Rel.Columns[i].Name...)
		keys = append(keys, '=')
		keys = appendValue(keys, c)
	}
	a.queue.Keys = keys
	a.matchIdx = use
	return use
}

// appendValue renders a value for a log message, shortened.
func appendValue(dst []byte, c *protocol.TupleColumn) []byte {
	const max = 64
	switch c.Kind {
	case protocol.ColumnNull:
		return append(dst, "NULL"...)
	case protocol.ColumnUnchanged:
		return append(dst, "(unchanged)"...)
	case protocol.ColumnBinary:
		dst = append(dst, "\\x"...)
		const hexdigits = "0123456789abcdef"
		for i, b := range c.Data {
			if i == max/2 {
				return append(dst, "..."...)
			}
			dst = append(dst, hexdigits[b>>4], hexdigits[b&15])
		}
		return dst
	}
	if len(c.Data) > max {
		dst = append(dst, c.Data[:max]...)
		return append(dst, "..."...)
	}
	return append(dst, c.Data...)
}

func (a *Applier) truncate(ctx context.Context, m *protocol.Truncate) error {
	tables := make([]string, 0, len(m.RelationIDs))
	only := make([]bool, 0, len(m.RelationIDs))
	var first *relmap.Entry
	for _, id := range m.RelationIDs {
		e, err := a.relation(ctx, id, pipeline.OpTruncate)
		if err != nil {
			return err
		}
		if first == nil {
			first = e
		}
		tables = append(tables, e.Target.Quoted)
		only = append(only, !e.Target.Partition)
	}
	if len(tables) == 0 {
		return nil
	}
	sql := sqlgen.Truncate(tables, only, m.Options&protocol.TruncateCascade != 0, m.Options&protocol.TruncateRestartIdentity != 0)
	a.sess.QueueSQL(pipeline.OpTruncate, first, sql)
	a.Stats.Truncates.Add(1)
	return nil
}
