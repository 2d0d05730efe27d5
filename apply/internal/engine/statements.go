package engine

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/protocol"
)

// statement returns the prepared statement for a change of the given shape,
// preparing it on first use. The shape is the kind ('I', 'U', 'D'), the
// columns an UPDATE sets (unchanged TOAST values are left out of the SET
// list, so one relation can need several UPDATE statements) and the columns
// that locate the row. Statements are cached per relation; a new Relation
// message replaces the relation's entry and with it its statements.
func (a *Applier) statement(ctx context.Context, e *relmap.Entry, kind byte, set *protocol.TupleData, match []int, full bool) (*pgconn.StatementDescription, error) {
	shape := append(a.shape[:0], kind)
	if set != nil {
		shape = appendMask(shape, len(e.Rel.Columns), func(i int) bool {
			return e.Tcol[i] >= 0 && set.Columns[i].Kind != protocol.ColumnUnchanged
		})
	}
	if match != nil {
		j := 0
		shape = appendMask(shape, len(e.Rel.Columns), func(i int) bool {
			if j < len(match) && match[j] == i {
				j++
				return true
			}
			return false
		})
	}
	a.shape = shape
	if sd, ok := e.Stmts[string(shape)]; ok {
		return sd, nil
	}
	base := kind
	if kind == 'G' {
		base = 'U'
	}
	sql, oids, names := buildStatement(e, base, set, match, full)
	if kind == 'G' {
		// update_exists=skip: leave the row alone when its new key is taken.
		sql, oids = guardNewKey(e, sql, oids)
	}
	sql, oids = a.wrapStatement(e, kind, set, sql, oids)
	sd, err := a.sess.StatementFor(ctx, sql, oids)
	if err != nil {
		return nil, &TxnError{Xid: a.txn.xid, CommitLSN: a.txn.finalLSN, Relation: e.String(), Op: opOfKind(kind).String(), Err: fmt.Errorf("preparing the statement: %w", err)}
	}
	e.Stmts[string(shape)] = sd
	e.NoteParams(sql, names)
	return sd, nil
}

// appendMask appends n bits, one per column, packed into bytes.
func appendMask(dst []byte, n int, bit func(i int) bool) []byte {
	var cur byte
	for i := 0; i < n; i++ {
		if bit(i) {
			cur |= 1 << (i & 7)
		}
		if i&7 == 7 {
			dst = append(dst, cur)
			cur = 0
		}
	}
	if n&7 != 0 {
		dst = append(dst, cur)
	}
	return dst
}

// buildStatement returns the SQL of a change of the given shape, the
// target types of its parameters and the source column each parameter
// carries (for errors: withColumn), in parameter order.
func buildStatement(e *relmap.Entry, kind byte, set *protocol.TupleData, match []int, full bool) (string, []uint32, []string) {
	t := e.Target
	var cols, names []string
	var oids []uint32
	for i := range e.Rel.Columns {
		ti := e.Tcol[i]
		if ti < 0 {
			continue
		}
		if kind == 'I' || (kind == 'U' && set.Columns[i].Kind != protocol.ColumnUnchanged) {
			cols = append(cols, sqlgen.QuoteIdent(t.Columns[ti].Name))
			oids = append(oids, t.Columns[ti].TypeOID)
			names = append(names, e.Rel.Columns[i].Name)
		}
	}
	if kind == 'I' {
		return sqlgen.Insert(t.Quoted, cols), oids, names
	}
	m := make([]sqlgen.MatchColumn, 0, len(match))
	for _, i := range match {
		tc := t.Columns[e.Tcol[i]]
		m = append(m, sqlgen.MatchColumn{Name: sqlgen.QuoteIdent(tc.Name), TextCompare: full && !tc.HasEq, Nullable: full, OpSchema: tc.EqSchema})
		oids = append(oids, tc.TypeOID)
		names = append(names, e.Rel.Columns[i].Name)
	}
	if kind == 'U' {
		return sqlgen.Update(t.Quoted, cols, m, full, t.Partition), oids, names
	}
	return sqlgen.Delete(t.Quoted, m, full, t.Partition), oids, names
}
