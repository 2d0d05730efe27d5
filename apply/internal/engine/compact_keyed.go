package engine

import (
	"context"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/apply/internal/compact"
	"github.com/walapply/walapply/apply/internal/pipeline"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/protocol"
)

func (a *Applier) writeUpdates(ctx context.Context, e *relmap.Entry, rows []*compact.Row) error {
	// Rows whose images hold unchanged TOAST values need SET lists without
	// those columns: rows are written in runs of the same set of columns
	// (their order does not matter: every row has its own key), each in
	// key order (internal/compact/order.go).
	a.net.SortByKey(rows)
	var order []string
	runs := map[string][]*compact.Row{}
	for _, r := range rows {
		m := make([]byte, len(r.Image))
		for i, x := range r.Image {
			m[i] = '0'
			if x.Kind == protocol.ColumnUnchanged {
				m[i] = '1'
			}
		}
		k := string(m)
		if _, ok := runs[k]; !ok {
			order = append(order, k)
		}
		runs[k] = append(runs[k], r)
	}
	for _, k := range order {
		if err := a.writeUpdateRun(ctx, e, runs[k]); err != nil {
			return err
		}
	}
	return nil
}

// writeUpdateRun writes updates whose images leave out the same columns.
func (a *Applier) writeUpdateRun(ctx context.Context, e *relmap.Entry, rows []*compact.Row) error {
	var set []int
	mask := make([]byte, 0, len(e.Rel.Columns))
	for i := range e.Rel.Columns {
		if e.Tcol[i] >= 0 && rows[0].Image[i].Kind != protocol.ColumnUnchanged {
			set = append(set, i)
			mask = append(mask, '1')
		} else {
			mask = append(mask, '0')
		}
	}
	if len(set) == 0 {
		return nil // nothing to write: every column is unchanged
	}
	per := len(e.Key) + len(set)
	conflict, fail := a.wraps('U')
	width := per
	if conflict != "" {
		width++ // the row's key as text, for the conflict record
	}
	arrays, arrs, elems, each := compact.KeyedForm(e, rows, set)
	return each(rows, width, func(rs []*compact.Row) error {
		sd, err := a.multiStatement(ctx, e, pipeline.OpUpdate, compact.ShapeName("U"+string(mask), arrays, len(rs), arrs), func() (string, []uint32) {
			return compact.UpdateSQL(e, set, conflict, fail, arrays, width, len(rs), arrs)
		})
		if err != nil {
			return err
		}
		a.queueMulti(pipeline.OpUpdate, e, sd, rs, set, conflict, fail, arrays, width, elems)
		a.Stats.Updates.Add(int64(len(rs)))
		return nil
	})
}

func (a *Applier) writeDeletes(ctx context.Context, e *relmap.Entry, rows []*compact.Row) error {
	a.net.SortByKey(rows)
	per := len(e.Key)
	conflict, fail := a.wraps('D')
	width := per
	if conflict != "" {
		width++
	}
	arrays, arrs, elems, each := compact.KeyedForm(e, rows, nil)
	return each(rows, width, func(rs []*compact.Row) error {
		sd, err := a.multiStatement(ctx, e, pipeline.OpDelete, compact.ShapeName("D", arrays, len(rs), arrs), func() (string, []uint32) {
			return compact.DeleteSQL(e, conflict, fail, arrays, width, len(rs), arrs)
		})
		if err != nil {
			return err
		}
		a.queueMulti(pipeline.OpDelete, e, sd, rs, nil, conflict, fail, arrays, width, elems)
		a.Stats.Deletes.Add(int64(len(rs)))
		return nil
	})
}

// addKeyedRows sets the parameters of a multi-row UPDATE (set: the columns
// it writes) or DELETE (set nil): each row's key, its set values and, when
// the statement records conflicts, its key as text; in the array form
// packed into one array per column of the row source, width wide, typed by
// elems where binary (packArrays).
func (a *Applier) addKeyedRows(e *relmap.Entry, rs []*compact.Row, set []int, keyText, arrays bool, width int, elems []uint32) {
	a.params, a.formats = a.params[:0], a.formats[:0]
	for _, r := range rs {
		for _, x := range r.Key {
			a.addCell(x)
		}
		for _, i := range set {
			a.addCell(r.Image[i])
		}
		if keyText {
			a.addKeyText(e, r)
		}
	}
	if arrays {
		a.packArrays(width, elems)
	}
}

// queueMulti queues a multi-row UPDATE (set: the columns it writes) or
// DELETE (set nil): its row parameters (addKeyedRows), the rows' keys for
// messages and, when the statement records its own conflicts, the record
// parameters.
func (a *Applier) queueMulti(op pipeline.Op, e *relmap.Entry, sd *pgconn.StatementDescription, rs []*compact.Row, set []int, conflict string, fail, arrays bool, width int, elems []uint32) {
	keyStart := len(a.queue.Keys)
	a.addKeyedRows(e, rs, set, conflict != "", arrays, width, elems)
	a.queue.Keys = a.renderKeys(a.queue.Keys, e, rs)
	if conflict != "" {
		a.appendRecordParams(e, nil)
	}
	a.sess.QueueStmt(op, e, sd, a.params, a.formats, keyStart, len(a.queue.Keys))
	q := a.queue.Last()
	q.Rows = len(rs)
	if !fail {
		q.Conflict = conflict
	}
}

// addKeyText adds a row's key rendered as text, the key of its conflict
// record, as a parameter; the text lives in the compactor's arena.
func (a *Applier) addKeyText(e *relmap.Entry, r *compact.Row) {
	c := a.net
	start := len(c.Arena)
	for j, i := range e.Key {
		if j > 0 {
			c.Arena = append(c.Arena, ", "...)
		}
		c.Arena = append(c.Arena, e.Rel.Columns[i].Name...)
		c.Arena = append(c.Arena, '=')
		x := r.Key[j]
		c.Arena = appendValue(c.Arena, &protocol.TupleColumn{Kind: x.Kind, Data: c.Bytes(x)})
	}
	a.params = append(a.params, c.Arena[start:len(c.Arena):len(c.Arena)])
	a.formats = append(a.formats, 0)
}

// renderKeys renders the keys of a multi-row statement for messages.
func (a *Applier) renderKeys(dst []byte, e *relmap.Entry, rs []*compact.Row) []byte {
	for n, r := range rs {
		if n > 0 {
			dst = append(dst, "; "...)
		}
		if n == 8 {
			dst = append(dst, "..."...)
			break
		}
		for j, i := range e.Key {
			if j > 0 {
				dst = append(dst, ", "...)
			}
			dst = append(dst, e.Rel.Columns[i].Name...)
			dst = append(dst, '=')
			x := r.Key[j]
			dst = appendValue(dst, &protocol.TupleColumn{Kind: x.Kind, Data: a.net.Bytes(x)})
		}
	}
	return dst
}
