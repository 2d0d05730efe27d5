package engine

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/apply/internal/compact"
	"github.com/walapply/walapply/apply/internal/copydata"
	"github.com/walapply/walapply/apply/internal/pipeline"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/protocol"
)

// writeOut writes the net changes out (internal/compact keeps them): per table, the
// deletes, then the updates, then the inserts, each as multi-row statements
// whose rows come from a row source (internal/compact/rows.go), or a long run of
// inserts as one COPY (internal/pipeline/copy.go).
//
// writeOut queues the pending net changes as statements: for every table
// its deletes and updates, then for every table its inserts (a replaced row
// is deleted, then inserted), and empties the compactor. Each table's own
// changes keep that order; the order between tables does not matter (see
// internal/compact), and the inserts come last so that the COPYs among them cut
// the batch in as few places as possible.
func (a *Applier) writeOut(ctx context.Context) error {
	c := a.net
	if c.N == 0 {
		return nil
	}
	inserts := make([][]*compact.Row, len(c.Tables))
	for n, t := range c.Tables {
		var dels, ups []*compact.Row
		for _, k := range t.Order {
			r := t.Rows[k]
			switch r.Kind {
			case compact.NetDelete:
				dels = append(dels, r)
			case compact.NetUpdate:
				ups = append(ups, r)
			case compact.NetInsert:
				inserts[n] = append(inserts[n], r)
			case compact.NetReplace:
				dels = append(dels, r)
				inserts[n] = append(inserts[n], r)
			}
		}
		if err := a.writeDeletes(ctx, t.E, dels); err != nil {
			return err
		}
		if err := a.writeUpdates(ctx, t.E, ups); err != nil {
			return err
		}
	}
	for n, t := range c.Tables {
		if err := a.writeInserts(ctx, t.E, inserts[n]); err != nil {
			return err
		}
	}
	c.Reset()
	return nil
}

func (a *Applier) addCell(x compact.Cell) {
	a.params = append(a.params, a.net.Bytes(x))
	f := int16(0)
	if x.Kind == protocol.ColumnBinary {
		f = 1
	}
	a.formats = append(a.formats, f)
}

// packArrays turns the parameters queued row by row (rows of width values)
// into width binary array parameters, one per column
// (compact.PackArrays), in the applier's reusable buffers.
func (a *Applier) packArrays(width int, elems []uint32) {
	a.arrayBuf, a.arrayEnds = compact.PackArrays(a.arrayBuf[:0], a.arrayEnds[:0], a.params, width, elems)
	a.params, a.formats = a.params[:0], a.formats[:0]
	start := 0
	for _, end := range a.arrayEnds {
		a.params = append(a.params, a.arrayBuf[start:end])
		a.formats = append(a.formats, 1)
		start = end
	}
}

// multiStatement returns the prepared statement of a multi-row shape.
func (a *Applier) multiStatement(ctx context.Context, e *relmap.Entry, op pipeline.Op, shape string, build func() (string, []uint32)) (*pgconn.StatementDescription, error) {
	if sd, ok := e.Stmts[shape]; ok {
		return sd, nil
	}
	sql, oids := build()
	sd, err := a.sess.StatementFor(ctx, sql, oids)
	if err != nil {
		return nil, &TxnError{Xid: a.txn.xid, CommitLSN: a.txn.finalLSN, Relation: e.String(), Op: op.String(),
			Err: fmt.Errorf("preparing the statement: %w", err)}
	}
	e.Stmts[shape] = sd
	return sd, nil
}

func (a *Applier) writeInserts(ctx context.Context, e *relmap.Entry, rows []*compact.Row) error {
	var cols []int // source columns written
	for i := range e.Rel.Columns {
		if e.Tcol[i] >= 0 {
			cols = append(cols, i)
		}
	}
	if len(cols) == 0 {
		for range rows {
			sd, err := a.statement(ctx, e, 'I', nil, nil, false)
			if err != nil {
				return err
			}
			a.params, a.formats = a.params[:0], a.formats[:0]
			a.sess.QueueStmt(pipeline.OpInsert, e, sd, a.params, a.formats, 0, 0)
		}
		return nil
	}
	if len(rows) >= CopyMinRun && a.queueCopyRun(e, rows, cols) {
		return nil
	}
	arrays, bin, each := compact.RowForm(e, rows)
	var arrs, elems []uint32
	if arrays {
		arrs = e.ArrayTypes(nil, cols, func(n int) bool { return bin.Image[cols[n]] })
		elems = e.ElemTypes(nil, cols, arrs)
	}
	return each(rows, len(cols), func(rs []*compact.Row) error {
		sd, err := a.multiStatement(ctx, e, pipeline.OpInsert, compact.ShapeName("I", arrays, len(rs), arrs), func() (string, []uint32) {
			return compact.InsertSQL(e, cols, arrays, len(rs), arrs)
		})
		if err != nil {
			return err
		}
		a.params, a.formats = a.params[:0], a.formats[:0]
		for _, r := range rs {
			for _, i := range cols {
				x := r.Image[i]
				if x.Kind == protocol.ColumnUnchanged {
					x.Kind = protocol.ColumnNull // as PostgreSQL does for an INSERT
				}
				a.addCell(x)
			}
		}
		if arrays {
			a.packArrays(len(cols), elems)
		}
		a.sess.QueueStmt(pipeline.OpInsert, e, sd, a.params, a.formats, 0, 0)
		a.Stats.Inserts.Add(int64(len(rs)))
		return nil
	})
}

// queueCopyRun queues a run of inserts as one COPY, unless its values mix
// text and binary or the table takes no COPY (copydata.SQL).
func (a *Applier) queueCopyRun(e *relmap.Entry, rows []*compact.Row, cols []int) bool {
	format := copydata.RowsFormat(rows, cols)
	if format == 0 {
		return false
	}
	sql, ok := copydata.SQL(e, format)
	if !ok {
		return false
	}
	a.sess.QueueCopy(e, sql, copydata.AppendRows(a.net, nil, rows, cols, format))
	a.Stats.Inserts.Add(int64(len(rows)))
	a.Stats.CopiedRows.Add(int64(len(rows)))
	return true
}
