package sqlgen

import (
	"strconv"
	"strings"
)

// RecordOIDs are the types of the five parameters that describe a conflict
// record: applier, relation, key, source xid, commit LSN.
var RecordOIDs = []uint32{25, 25, 25, 20, 25}

// RecordInsert is the outer INSERT of a wrapped change: it writes one
// conflict record per row the SELECT that follows yields. first is the
// number of the first of the five record parameters; key is the SQL of the
// key text (a parameter for one row, a column of the VALUES list for many).
// kind and resolution are constants of the caller, written as literals.
func RecordInsert(b *strings.Builder, kind, resolution string, first int, key string) {
	p := func(i int) string { return "$" + strconv.Itoa(first+i) }
	b.WriteString("INSERT INTO walapply.conflicts (applier, kind, relation, key, source_xid, commit_lsn, resolution) SELECT ")
	b.WriteString(p(0) + ", '" + kind + "', " + p(1) + ", " + key + ", " + p(3) + ", " + p(4) + "::pg_catalog.pg_lsn, '" + resolution + "'")
}

// RaiseInstead writes, for the error policy, the SELECT that raises the
// conflict instead of recording it: relation and keys are SQL expressions.
func RaiseInstead(b *strings.Builder, kind string, first int, keys string) {
	b.WriteString("SELECT walapply.conflict_error('" + kind + "', $" + strconv.Itoa(first+1) + ", " + keys + ")")
}

// WrapMissing wraps one UPDATE or DELETE so that, when it finds no row, a
// conflict record of kind is written (and its key returned), or with fail
// the conflict is raised as an error.
func WrapMissing(base, kind string, first int, fail bool) string {
	var b strings.Builder
	b.WriteString("WITH _w AS (")
	b.WriteString(base)
	b.WriteString(" RETURNING 1) ")
	if fail {
		RaiseInstead(&b, kind, first, "$"+strconv.Itoa(first+2))
		b.WriteString(" WHERE NOT EXISTS (SELECT 1 FROM _w)")
		return b.String()
	}
	RecordInsert(&b, kind, "skipped", first, "$"+strconv.Itoa(first+2))
	b.WriteString(" WHERE NOT EXISTS (SELECT 1 FROM _w) RETURNING key")
	return b.String()
}

// WrapUpdateApply wraps one UPDATE so that, when it finds no row, the new
// row is inserted into table from the parameters numbered from firstInsert
// and a conflict record of kind written.
func WrapUpdateApply(base, kind, table string, cols []string, firstInsert, first int) string {
	var b strings.Builder
	b.WriteString("WITH _w AS (")
	b.WriteString(base)
	b.WriteString(" RETURNING 1), _i AS (INSERT INTO ")
	b.WriteString(table)
	b.WriteString(" (" + strings.Join(cols, ", ") + ") SELECT ")
	for i := range cols {
		if i > 0 {
			b.WriteString(", ")
		}
		WriteParam(&b, firstInsert+i)
	}
	b.WriteString(" WHERE NOT EXISTS (SELECT 1 FROM _w) RETURNING 1) ")
	RecordInsert(&b, kind, "applied", first, "$"+strconv.Itoa(first+2))
	b.WriteString(" FROM _i RETURNING key")
	return b.String()
}

// WrapInsert wraps one INSERT for the skip or (with apply) the apply policy
// of an insert conflict of kind: ON CONFLICT DO NOTHING, or DO UPDATE of
// every column on the key (xmax is not zero for a row that ON CONFLICT
// updated).
func WrapInsert(base, kind string, apply bool, keyCols, cols []string, first int) string {
	var b strings.Builder
	b.WriteString("WITH _w AS (")
	b.WriteString(base)
	if apply {
		b.WriteString(" ON CONFLICT (" + strings.Join(keyCols, ", ") + ") DO UPDATE SET ")
		for i, c := range cols {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(c + " = EXCLUDED." + c)
		}
		b.WriteString(" RETURNING xmax <> 0 AS _c) ")
		RecordInsert(&b, kind, "applied", first, "$"+strconv.Itoa(first+2))
		b.WriteString(" FROM _w WHERE _w._c RETURNING key")
		return b.String()
	}
	b.WriteString(" ON CONFLICT DO NOTHING RETURNING 1) ")
	RecordInsert(&b, kind, "skipped", first, "$"+strconv.Itoa(first+2))
	b.WriteString(" WHERE NOT EXISTS (SELECT 1 FROM _w) RETURNING key")
	return b.String()
}
