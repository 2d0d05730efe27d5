package apply

import (
	"context"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/apply/internal/compact"
	"github.com/walapply/walapply/apply/internal/pipeline"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/protocol"
)

func (a *applier) writeUpdates(ctx context.Context, e *relmap.Entry, rows []*compact.Row) error {
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
func (a *applier) writeUpdateRun(ctx context.Context, e *relmap.Entry, rows []*compact.Row) error {
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
	arrays, arrs, elems, each := keyedForm(e, rows, set)
	return each(rows, width, func(rs []*compact.Row) error {
		sd, err := a.multiStatement(ctx, e, pipeline.OpUpdate, compact.ShapeName("U"+string(mask), arrays, len(rs), arrs), func() (string, []uint32) {
			types := keyedTypes(e, set, conflict != "")
			var b strings.Builder
			if conflict != "" {
				b.WriteString("WITH _w AS (")
			}
			b.WriteString("UPDATE " + e.Target.Quoted + " AS _t SET ")
			for n, i := range set {
				if n > 0 {
					b.WriteString(", ")
				}
				b.WriteString(sqlgen.QuoteIdent(e.Target.Columns[e.Tcol[i]].Name))
				b.WriteString(" = _v.column" + strconv.Itoa(len(e.Key)+n+1))
			}
			b.WriteString(" FROM (")
			compact.WriteRowSource(&b, arrays, len(rs), types, arrs)
			b.WriteString(") AS _v WHERE ")
			keyMatch(&b, e)
			oids := e.TypeOIDs(set, e.TypeOIDs(e.Key, nil))
			return finishMissing(&b, e, conflict, fail, arrays, width, len(rs), types, oids, arrs)
		})
		if err != nil {
			return err
		}
		a.queueMulti(pipeline.OpUpdate, e, sd, rs, set, conflict, fail, arrays, width, elems)
		a.Stats.Updates.Add(int64(len(rs)))
		return nil
	})
}

func (a *applier) writeDeletes(ctx context.Context, e *relmap.Entry, rows []*compact.Row) error {
	a.net.SortByKey(rows)
	per := len(e.Key)
	conflict, fail := a.wraps('D')
	width := per
	if conflict != "" {
		width++
	}
	arrays, arrs, elems, each := keyedForm(e, rows, nil)
	return each(rows, width, func(rs []*compact.Row) error {
		sd, err := a.multiStatement(ctx, e, pipeline.OpDelete, compact.ShapeName("D", arrays, len(rs), arrs), func() (string, []uint32) {
			types := keyedTypes(e, nil, conflict != "")
			var b strings.Builder
			if conflict != "" {
				b.WriteString("WITH _w AS (")
			}
			b.WriteString("DELETE FROM " + e.Target.Quoted + " AS _t USING (")
			compact.WriteRowSource(&b, arrays, len(rs), types, arrs)
			b.WriteString(") AS _v WHERE ")
			keyMatch(&b, e)
			return finishMissing(&b, e, conflict, fail, arrays, width, len(rs), types, e.TypeOIDs(e.Key, nil), arrs)
		})
		if err != nil {
			return err
		}
		a.queueMulti(pipeline.OpDelete, e, sd, rs, nil, conflict, fail, arrays, width, elems)
		a.Stats.Deletes.Add(int64(len(rs)))
		return nil
	})
}

// finishMissing ends a multi-row UPDATE or DELETE: the parameter types of
// its rows (oids, one row's worth) and, when the statement handles
// update_missing or delete_missing itself, the outer statement that records
// (or, with fail, raises) the rows the change did not find; width is the
// row source's width, its last column the row's key as text; types and
// arrs are the row source's SQL types and, in the array form, the array
// types of binary columns (rowParamOIDs).
//
// The change runs in a CTE that returns a row per row it changed, and the
// outer statement reads the row source a second time for the rows whose
// key is not in the table. It does so only when the change fell short: the
// count is an InitPlan, the condition on it a one-time filter, so on the
// usual path the outer statement costs a count and nothing per row. (A
// CTE holding the row source for both reads and a NOT IN over the changed
// keys cost the target 17-21 us per pgbench_accounts row against 16-18 us;
// timed directly on PostgreSQL 18, rounds of 10,000 sorted rows.) The
// second read sees the table as the statement began, so a row the change
// did not find because it was not there is the one recorded.
func finishMissing(b *strings.Builder, e *relmap.Entry, conflict string, fail, arrays bool, width, rows int, types []string, oids, arrs []uint32) (string, []uint32) {
	if conflict != "" {
		oids = append(oids, 25) // the key as text
	}
	all := compact.RowParamOIDs(arrays, rows, oids, arrs)
	if conflict == "" {
		return b.String(), all
	}
	ck := "_v.column" + strconv.Itoa(width)
	b.WriteString(" RETURNING 1) ")
	if fail {
		sqlgen.RaiseInstead(b, conflict, len(all)+1, "string_agg("+ck+", '; ')")
	} else {
		sqlgen.RecordInsert(b, conflict, "skipped", len(all)+1, ck)
	}
	given := strconv.Itoa(rows)
	if arrays {
		given = "pg_catalog.cardinality($1)" // the first column's array
	}
	b.WriteString(" FROM (")
	compact.WriteRowSource(b, arrays, rows, types, arrs)
	b.WriteString(") AS _v WHERE (SELECT pg_catalog.count(*) FROM _w) < " + given)
	b.WriteString(" AND NOT EXISTS (SELECT 1 FROM " + e.Target.Quoted + " AS _t WHERE ")
	keyMatch(b, e)
	b.WriteString(")")
	if fail {
		b.WriteString(" HAVING pg_catalog.count(*) > 0")
	} else {
		b.WriteString(" RETURNING key")
	}
	return b.String(), append(all, sqlgen.RecordOIDs...)
}

// keyedForm is rowForm for a multi-row UPDATE (set: the columns it writes)
// or DELETE (set nil), whose row source is the key columns, then set: with
// arrays, the array types (arrs) and element types (elems) of its columns.
func keyedForm(e *relmap.Entry, rows []*compact.Row, set []int) (arrays bool, arrs, elems []uint32, each func([]*compact.Row, int, func([]*compact.Row) error) error) {
	arrays, bin, each := compact.RowForm(e, rows)
	if arrays {
		arrs = e.ArrayTypes(nil, e.Key, func(n int) bool { return bin.Key[n] })
		arrs = e.ArrayTypes(arrs, set, func(n int) bool { return bin.Image[set[n]] })
		elems = e.ElemTypes(e.ElemTypes(nil, e.Key, arrs), set, arrs[len(e.Key):])
	}
	return arrays, arrs, elems, each
}

// keyedTypes are the SQL types of the row source of a multi-row UPDATE or
// DELETE: the key columns, the set columns, and the key as text when the
// statement records conflicts.
func keyedTypes(e *relmap.Entry, set []int, keyText bool) []string {
	types := e.TypeNames(set, e.TypeNames(e.Key, nil))
	if keyText {
		types = append(types, "pg_catalog.text")
	}
	return types
}

// addKeyedRows sets the parameters of a multi-row UPDATE (set: the columns
// it writes) or DELETE (set nil): each row's key, its set values and, when
// the statement records conflicts, its key as text; in the array form
// packed into one array per column of the row source, width wide, typed by
// elems where binary (packArrays).
func (a *applier) addKeyedRows(e *relmap.Entry, rs []*compact.Row, set []int, keyText, arrays bool, width int, elems []uint32) {
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
func (a *applier) queueMulti(op pipeline.Op, e *relmap.Entry, sd *pgconn.StatementDescription, rs []*compact.Row, set []int, conflict string, fail, arrays bool, width int, elems []uint32) {
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
func (a *applier) addKeyText(e *relmap.Entry, r *compact.Row) {
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
func (a *applier) renderKeys(dst []byte, e *relmap.Entry, rs []*compact.Row) []byte {
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

// keyMatch writes the join of the target's key columns with v's first
// columns.
func keyMatch(b *strings.Builder, e *relmap.Entry) {
	for n, i := range e.Key {
		if n > 0 {
			b.WriteString(" AND ")
		}
		tc := e.Target.Columns[e.Tcol[i]]
		b.WriteString("_t.")
		b.WriteString(sqlgen.QuoteIdent(tc.Name))
		if tc.EqSchema != "" {
			b.WriteString(" OPERATOR(" + sqlgen.QuoteIdent(tc.EqSchema) + ".=) ")
		} else {
			b.WriteString(" = ")
		}
		b.WriteString("_v.column" + strconv.Itoa(n+1))
	}
}
