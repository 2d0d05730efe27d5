package engine

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

// appendRecordParams appends the five record parameters.
func (a *Applier) appendRecordParams(e *relmap.Entry, key []byte) {
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
func (a *Applier) wraps(kind byte) (conflict string, fail bool) {
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

// wrapStatement turns a per-row statement into its self-recording form
// (see ConflictPolicies). oids gets the record parameters' types.
func (a *Applier) wrapStatement(e *relmap.Entry, kind byte, set *protocol.TupleData, sql string, oids []uint32) (string, []uint32) {
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
		sql = sqlgen.WrapInsert(sql, ConflictInsertExists, policy == PolicyApply, keyCols, cols, first)
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
			sql = sqlgen.WrapUpdateApply(sql, ConflictUpdateMissing, e.Target.Quoted, cols, 1, first)
		} else {
			sql = sqlgen.WrapMissing(sql, ConflictUpdateMissing, first, fail)
		}
	case 'D':
		sql = sqlgen.WrapMissing(sql, ConflictDeleteMissing, first, fail)
	}
	return sql, append(oids, sqlgen.RecordOIDs...)
}

// queueRow queues a per-row change with its conflict handling.
func (a *Applier) queueRow(op pipeline.Op, kind byte, e *relmap.Entry, sd *pgconn.StatementDescription, keyStart int) {
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
func (a *Applier) renderTupleKey(dst []byte, e *relmap.Entry, t *protocol.TupleData) []byte {
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
func (a *Applier) queueUpdateExists(ctx context.Context, e *relmap.Entry, m *protocol.Update) error {
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
		sqlgen.RecordInsert(&b, ConflictUpdateExists, a.resolution(ConflictUpdateExists), len(oids)+1, "$"+strconv.Itoa(len(oids)+3))
		b.WriteString(" FROM _x RETURNING key")
		oids = append(oids, sqlgen.RecordOIDs...)
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
