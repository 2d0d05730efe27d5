package apply

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/apply/internal/pipeline"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/protocol"
)

// recordOIDs are the types of the five parameters that describe a conflict
// record: applier, relation, key, source xid, commit LSN.
var recordOIDs = []uint32{25, 25, 25, 20, 25}

// recordInsert is the outer INSERT of a wrapped change: it writes one
// conflict record per row the SELECT that follows yields. first is the
// number of the first of the five record parameters; key is the SQL of the
// key text (a parameter for one row, a column of the VALUES list for many).
func recordInsert(b *strings.Builder, kind, resolution string, first int, key string) {
	p := func(i int) string { return "$" + strconv.Itoa(first+i) }
	b.WriteString("INSERT INTO walapply.conflicts (applier, kind, relation, key, source_xid, commit_lsn, resolution) SELECT ")
	b.WriteString(p(0) + ", '" + kind + "', " + p(1) + ", " + key + ", " + p(3) + ", " + p(4) + "::pg_catalog.pg_lsn, '" + resolution + "'")
}

// wrapMissing wraps one UPDATE or DELETE so that, when it finds no row, a
// conflict record is written (and its key returned), or with fail the
// conflict is raised as an error.
func wrapMissing(base, kind string, first int, fail bool) string {
	var b strings.Builder
	b.WriteString("WITH _w AS (")
	b.WriteString(base)
	b.WriteString(" RETURNING 1) ")
	if fail {
		raiseInstead(&b, kind, first, "$"+strconv.Itoa(first+2))
		b.WriteString(" WHERE NOT EXISTS (SELECT 1 FROM _w)")
		return b.String()
	}
	recordInsert(&b, kind, "skipped", first, "$"+strconv.Itoa(first+2))
	b.WriteString(" WHERE NOT EXISTS (SELECT 1 FROM _w) RETURNING key")
	return b.String()
}

// wrapUpdateApply wraps one UPDATE so that, when it finds no row, the new
// row is inserted from the parameters insertParams (numbered from
// firstInsert) and the conflict recorded.
func wrapUpdateApply(base, table string, cols []string, firstInsert, first int) string {
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
		sqlgen.WriteParam(&b, firstInsert+i)
	}
	b.WriteString(" WHERE NOT EXISTS (SELECT 1 FROM _w) RETURNING 1) ")
	recordInsert(&b, ConflictUpdateMissing, "applied", first, "$"+strconv.Itoa(first+2))
	b.WriteString(" FROM _i RETURNING key")
	return b.String()
}

// wrapInsert wraps one INSERT for the skip or apply policy of
// insert_exists: ON CONFLICT DO NOTHING, or DO UPDATE of every column on
// the key (xmax is not zero for a row that ON CONFLICT updated).
func wrapInsert(base string, policy string, keyCols, cols []string, first int) string {
	var b strings.Builder
	b.WriteString("WITH _w AS (")
	b.WriteString(base)
	if policy == PolicyApply {
		b.WriteString(" ON CONFLICT (" + strings.Join(keyCols, ", ") + ") DO UPDATE SET ")
		for i, c := range cols {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(c + " = EXCLUDED." + c)
		}
		b.WriteString(" RETURNING xmax <> 0 AS _c) ")
		recordInsert(&b, ConflictInsertExists, "applied", first, "$"+strconv.Itoa(first+2))
		b.WriteString(" FROM _w WHERE _w._c RETURNING key")
		return b.String()
	}
	b.WriteString(" ON CONFLICT DO NOTHING RETURNING 1) ")
	recordInsert(&b, ConflictInsertExists, "skipped", first, "$"+strconv.Itoa(first+2))
	b.WriteString(" WHERE NOT EXISTS (SELECT 1 FROM _w) RETURNING key")
	return b.String()
}

// appendRecordParams appends the five record parameters.
func (a *applier) appendRecordParams(e *relmap.Entry, key []byte) {
	q := a.recordBuf[:0]
	q = append(q, a.name...)
	n0 := len(q)
	q = append(q, e.String()...)
	n1 := len(q)
	q = append(q, key...)
	n2 := len(q)
	q = strconv.AppendUint(q, uint64(a.txn.xid), 10)
	n3 := len(q)
	q = appendLSN(q, a.txn.finalLSN)
	a.recordBuf = q
	a.params = append(a.params, q[:n0], q[n0:n1], q[n1:n2], q[n2:n3], q[n3:])
	a.formats = append(a.formats, 0, 0, 0, 0, 0)
}

// appendLSN appends l's text form (LSN.String) to dst without allocating.
func appendLSN(dst []byte, l protocol.LSN) []byte {
	const digits = "0123456789ABCDEF"
	half := func(dst []byte, v uint32) []byte {
		if v == 0 {
			return append(dst, '0')
		}
		var b [8]byte
		i := len(b)
		for ; v > 0; v >>= 4 {
			i--
			b[i] = digits[v&15]
		}
		return append(dst, b[i:]...)
	}
	dst = half(dst, uint32(l>>32))
	dst = append(dst, '/')
	return half(dst, uint32(l))
}

// wraps tells how a per-row statement of the given kind handles its
// conflict: the kind it meets ("" when it needs no wrapping), and whether
// its policy is error (the statement then raises the error itself, through
// walapply.conflict_error, so that the transaction fails before COMMIT).
func (a *applier) wraps(kind byte) (conflict string, fail bool) {
	switch kind {
	case 'I':
		if a.policies[ConflictInsertExists] != PolicyError {
			return ConflictInsertExists, false
		}
	case 'U':
		return ConflictUpdateMissing, a.policies[ConflictUpdateMissing] == PolicyError
	case 'D':
		return ConflictDeleteMissing, a.policies[ConflictDeleteMissing] == PolicyError
	}
	return "", false
}

// raiseInstead writes, for the error policy, the SELECT that raises the
// conflict instead of recording it: relation and keys are SQL expressions.
func raiseInstead(b *strings.Builder, kind string, first int, keys string) {
	b.WriteString("SELECT walapply.conflict_error('" + kind + "', $" + strconv.Itoa(first+1) + ", " + keys + ")")
}

// wrapStatement turns a per-row statement into its self-recording form
// (see ConflictPolicies). oids gets the record parameters' types.
func (a *applier) wrapStatement(e *relmap.Entry, kind byte, set *protocol.TupleData, sql string, oids []uint32) (string, []uint32) {
	conflict, fail := a.wraps(kind)
	if conflict == "" {
		return sql, oids
	}
	first := len(oids) + 1
	switch kind {
	case 'I':
		var keyCols, cols []string
		for i := range e.Rel.Columns {
			if e.Tcol[i] < 0 {
				continue
			}
			c := sqlgen.QuoteIdent(e.Target.Columns[e.Tcol[i]].Name)
			cols = append(cols, c)
			if e.Rel.Columns[i].IsKey() && e.Rel.ReplicaIdentity != protocol.ReplicaIdentityFull {
				keyCols = append(keyCols, c)
			}
		}
		policy := a.policies[ConflictInsertExists]
		if len(keyCols) == 0 {
			policy = PolicySkip // no key to upsert on
		}
		sql = wrapInsert(sql, policy, keyCols, cols, first)
	case 'U':
		full := true
		var cols []string
		for i := range e.Rel.Columns {
			if e.Tcol[i] < 0 {
				continue
			}
			if set.Columns[i].Kind == protocol.ColumnUnchanged {
				full = false
			}
			cols = append(cols, sqlgen.QuoteIdent(e.Target.Columns[e.Tcol[i]].Name))
		}
		if a.policies[ConflictUpdateMissing] == PolicyApply && full {
			// The SET parameters are the whole new row: insert it from them.
			sql = wrapUpdateApply(sql, e.Target.Quoted, cols, 1, first)
		} else {
			sql = wrapMissing(sql, ConflictUpdateMissing, first, fail)
		}
	case 'D':
		sql = wrapMissing(sql, ConflictDeleteMissing, first, fail)
	}
	return sql, append(oids, recordOIDs...)
}

// queueRow queues a per-row change with its conflict handling.
func (a *applier) queueRow(op pipeline.Op, kind byte, e *relmap.Entry, sd *pgconn.StatementDescription, keyStart int) {
	conflict, fail := a.wraps(kind)
	if conflict != "" {
		a.appendRecordParams(e, a.queue.Keys[keyStart:])
	}
	a.sess.QueueStmt(op, e, sd, a.params, a.formats, keyStart, len(a.queue.Keys))
	if !fail {
		a.queue.Last().Conflict = conflict
	}
}

// renderTupleKey renders the replica identity key of a tuple (every
// column under REPLICA IDENTITY FULL) for messages and records.
func (a *applier) renderTupleKey(dst []byte, e *relmap.Entry, t *protocol.TupleData) []byte {
	n := 0
	for i, c := range e.Rel.Columns {
		if !c.IsKey() || i >= len(t.Columns) {
			continue
		}
		if n > 0 {
			dst = append(dst, ", "...)
		}
		n++
		dst = append(dst, c.Name...)
		dst = append(dst, '=')
		dst = appendValue(dst, &t.Columns[i])
	}
	return dst
}

// keyMoves reports whether an UPDATE moves a row onto another replica
// identity key (the only case of update_exists that is recognised).
func keyMoves(e *relmap.Entry, m *protocol.Update) bool {
	if m.OldKind != protocol.TupleOldKey || e.Rel.ReplicaIdentity == protocol.ReplicaIdentityFull {
		return false
	}
	for _, i := range e.Key {
		o, n := &m.Old.Columns[i], &m.New.Columns[i]
		if o.Kind != n.Kind || string(o.Data) != string(n.Data) {
			return true
		}
	}
	return false
}

// newKeyMatch writes the match of a table's key columns with parameters
// from first on.
func newKeyMatch(b *strings.Builder, e *relmap.Entry, alias string, first int) []uint32 {
	var oids []uint32
	for n, i := range e.Key {
		if n > 0 {
			b.WriteString(" AND ")
		}
		tc := e.Target.Columns[e.Tcol[i]]
		b.WriteString(alias + sqlgen.QuoteIdent(tc.Name))
		if tc.EqSchema != "" {
			b.WriteString(" OPERATOR(" + sqlgen.QuoteIdent(tc.EqSchema) + ".=) ")
		} else {
			b.WriteString(" = ")
		}
		sqlgen.WriteParam(b, first+n)
		oids = append(oids, tc.TypeOID)
	}
	return oids
}

// guardNewKey adds to an UPDATE the condition that no other row holds the
// new key; the new key's values follow the statement's parameters.
func guardNewKey(e *relmap.Entry, sql string, oids []uint32) (string, []uint32) {
	var b strings.Builder
	b.WriteString(sql)
	b.WriteString(" AND NOT EXISTS (SELECT 1 FROM " + e.Target.Quoted + " AS _o WHERE ")
	keyOIDs := newKeyMatch(&b, e, "_o.", len(oids)+1)
	b.WriteString(")")
	return b.String(), append(oids, keyOIDs...)
}

// queueUpdateExists handles update_exists ahead of an UPDATE that moves a
// row onto a new key: with skip it records the conflict when the key is
// taken (the guarded UPDATE then leaves the row alone); with apply it
// removes the row that holds the key, and records that.
func (a *applier) queueUpdateExists(ctx context.Context, e *relmap.Entry, m *protocol.Update) error {
	policy := a.policies[ConflictUpdateExists]
	shape := "xE" + policy
	sd, ok := e.Stmts[shape]
	if !ok {
		var b strings.Builder
		if policy == PolicyApply {
			b.WriteString("WITH _x AS (DELETE FROM " + e.Target.Quoted + " AS _o WHERE ")
		} else {
			b.WriteString("WITH _x AS (SELECT 1 FROM " + e.Target.Quoted + " AS _o WHERE ")
		}
		oids := newKeyMatch(&b, e, "_o.", 1)
		if policy == PolicyApply {
			b.WriteString(" RETURNING 1) ")
		} else {
			b.WriteString(" LIMIT 1) ")
		}
		recordInsert(&b, ConflictUpdateExists, a.resolution(ConflictUpdateExists), len(oids)+1, "$"+strconv.Itoa(len(oids)+3))
		b.WriteString(" FROM _x RETURNING key")
		oids = append(oids, recordOIDs...)
		var err error
		if sd, err = a.sess.StatementFor(ctx, b.String(), oids); err != nil {
			return &TxnError{Xid: a.txn.xid, CommitLSN: a.txn.finalLSN, Relation: e.String(), Op: OpUpdate, Err: fmt.Errorf("preparing the statement: %w", err)}
		}
		e.Stmts[shape] = sd
	}
	a.params, a.formats = a.params[:0], a.formats[:0]
	for _, i := range e.Key {
		a.addParam(&m.New.Columns[i])
	}
	keyStart := len(a.queue.Keys)
	a.queue.Keys = a.renderTupleKey(a.queue.Keys, e, &m.New)
	a.appendRecordParams(e, a.queue.Keys[keyStart:])
	a.sess.QueueStmt(pipeline.OpUpdate, e, sd, a.params, a.formats, keyStart, len(a.queue.Keys))
	q := a.queue.Last()
	q.Conflict = ConflictUpdateExists
	return nil
}
