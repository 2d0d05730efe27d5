package compact

import (
	"strconv"
	"strings"

	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/apply/internal/sqlgen"
)

// InsertSQL returns the SQL of a multi-row INSERT into e's table of rows
// rows, writing the source columns cols, and its parameter types; arrays
// and arrs are the row source's form (RowForm, e.ArrayTypes).
func InsertSQL(e *relmap.Entry, cols []int, arrays bool, rows int, arrs []uint32) (string, []uint32) {
	var b strings.Builder
	b.WriteString("INSERT INTO " + e.Target.Quoted + " (")
	var oids []uint32
	var types []string
	for n, i := range cols {
		if n > 0 {
			b.WriteString(", ")
		}
		tc := e.Target.Columns[e.Tcol[i]]
		b.WriteString(sqlgen.QuoteIdent(tc.Name))
		oids = append(oids, tc.TypeOID)
		types = append(types, tc.CastType)
	}
	b.WriteString(") " + sqlgen.OverridingSystemValue)
	WriteRowSource(&b, arrays, rows, types, arrs)
	return b.String(), RowParamOIDs(arrays, rows, oids, arrs)
}

// UpdateSQL returns the SQL of a multi-row UPDATE of e's table setting the
// source columns set, by key, and its parameter types. conflict, when not
// empty, is the conflict kind the statement records itself (fail: raises
// instead) for the rows it does not find (finishMissing); width is the row
// source's width, rows its rows, arrays and arrs its form (KeyedForm).
func UpdateSQL(e *relmap.Entry, set []int, conflict string, fail, arrays bool, width, rows int, arrs []uint32) (string, []uint32) {
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
	WriteRowSource(&b, arrays, rows, types, arrs)
	b.WriteString(") AS _v WHERE ")
	keyMatch(&b, e)
	oids := e.TypeOIDs(set, e.TypeOIDs(e.Key, nil))
	return finishMissing(&b, e, conflict, fail, arrays, width, rows, types, oids, arrs)
}

// DeleteSQL returns the SQL of a multi-row DELETE from e's table by key and
// its parameter types; the arguments are UpdateSQL's.
func DeleteSQL(e *relmap.Entry, conflict string, fail, arrays bool, width, rows int, arrs []uint32) (string, []uint32) {
	types := keyedTypes(e, nil, conflict != "")
	var b strings.Builder
	if conflict != "" {
		b.WriteString("WITH _w AS (")
	}
	b.WriteString("DELETE FROM " + e.Target.Quoted + " AS _t USING (")
	WriteRowSource(&b, arrays, rows, types, arrs)
	b.WriteString(") AS _v WHERE ")
	keyMatch(&b, e)
	return finishMissing(&b, e, conflict, fail, arrays, width, rows, types, e.TypeOIDs(e.Key, nil), arrs)
}

// finishMissing ends a multi-row UPDATE or DELETE: the parameter types of
// its rows (oids, one row's worth) and, when the statement handles
// update_missing or delete_missing itself, the outer statement that records
// (or, with fail, raises) the rows the change did not find; width is the
// row source's width, its last column the row's key as text; types and
// arrs are the row source's SQL types and, in the array form, the array
// types of binary columns (RowParamOIDs).
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
	all := RowParamOIDs(arrays, rows, oids, arrs)
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
	WriteRowSource(b, arrays, rows, types, arrs)
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

// KeyedForm is RowForm for a multi-row UPDATE (set: the columns it writes)
// or DELETE (set nil), whose row source is the key columns, then set: with
// arrays, the array types (arrs) and element types (elems) of its columns.
func KeyedForm(e *relmap.Entry, rows []*Row, set []int) (arrays bool, arrs, elems []uint32, each func([]*Row, int, func([]*Row) error) error) {
	arrays, bin, each := RowForm(e, rows)
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
