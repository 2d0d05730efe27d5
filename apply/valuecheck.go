package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/apply/internal/compact"
	"github.com/walapply/walapply/apply/internal/pipeline"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/protocol"
)

// checking reports whether the transaction at hand is the one a retry
// stops at, applied change by change.
//
// Naming the column of a rejected value. PostgreSQL names a type, not a
// column, when a value does not fit its target column's type modifier
// ("value too long for type character varying(10)", "numeric field
// overflow"), and a multi-row statement names no parameter either. withColumn (errdetail.go) narrows the
// column down from the statement and the type; when several columns have
// that type, or to say what the value looked like, the value itself is
// needed, and by then it is gone: a batch encodes its values when queued,
// and keeping a copy of every batch's values for the rare failure would
// cost the hot path memory and time. So the check is made after the fact.
//
// A transaction that failed on a value (unchecked) makes Run retry once
// without grouping up to it (Config.retryUngrouped), as for a failure in
// a group (and once more when, applied one by one, an earlier transaction
// of the group is the one that fails). In that retry the failed transaction is applied change by change
// (checking): each change is sent and its result read before the next is
// queued, so that when the target rejects a value the change that holds it
// is still at hand. checkValues then asks the target which of its values
// the column refuses: one query per candidate column on the control
// connection (the applying one is in the aborted transaction), which
// assigns the value to the column's type, modifier included, by the
// target's own input functions. Asking the target, rather than checking
// lengths and precisions here, gives PostgreSQL's exact rule for every
// type (varchar and char with trailing spaces, bit, numeric rounding,
// domains, the target's encoding) without knowing any of them. A plain
// cast would not do: an explicit cast to varchar(10) truncates silently;
// json_populate_record assigns as an INSERT does.
//
// The cost falls on the failure only: a round trip per change of the one
// transaction being checked, and one per candidate column. The error then
// names the column and the value's shape (valueShape): its length, or for
// a number its digits, never the value itself, which may be a secret.
func (a *applier) checking() bool {
	return a.noGroupThrough != 0 && a.txn.finalLSN == a.noGroupThrough
}

// checks reports whether msg, a change, is sent on its own (checking):
// an INSERT or UPDATE, whose values a column may refuse.
func (a *applier) checks(msg protocol.Message) bool {
	if !a.checking() {
		return false
	}
	switch msg.(type) {
	case *protocol.Insert, *protocol.Update:
		return true
	}
	return false
}

// flushChange sends what is queued and reads the results; in the checked
// transaction an error about a value of msg names its column.
func (a *applier) flushChange(ctx context.Context, msg protocol.Message) (*pipeline.Stmt, error) {
	failed, err := a.sess.Flush(ctx)
	if err != nil && a.checking() {
		err = a.checkValues(ctx, failed, msg, err)
	}
	return failed, err
}

// valueProbeSQL assigns $2, a value of the column $1's type (without its
// modifier), to that column of the table's row type as an INSERT would:
// json_populate_record runs the column type's input function with the
// column's modifier, which raises the error the statement raised when the
// value does not fit.
const valueProbeSQL = `SELECT pg_catalog.json_populate_record(NULL::%s, pg_catalog.json_build_object($1::pg_catalog.text, $2::pg_catalog.text)) IS NULL`

// checkValues returns err with the column named whose value the target
// rejects, when err is a value error (isValueError) of q, the
// statement of msg, an INSERT or UPDATE. Candidates are the columns
// withColumn narrows the error down to, else every column written; the
// first whose value alone the target rejects with the same SQLSTATE is
// named. Otherwise err is returned unchanged.
func (a *applier) checkValues(ctx context.Context, q *pipeline.Stmt, msg protocol.Message, err error) error {
	var pgErr *pgconn.PgError
	if q == nil || q.Rel == nil || q.Rel.Target == nil || a.catalog == nil || !errors.As(err, &pgErr) || !isValueError(pgErr) {
		return err
	}
	e := q.Rel
	var t *protocol.TupleData
	switch m := msg.(type) {
	case *protocol.Insert:
		if m.RelationID == e.Rel.RelationID && q.Op == pipeline.OpInsert {
			t = &m.New
		}
	case *protocol.Update:
		if m.RelationID == e.Rel.RelationID && q.Op == pipeline.OpUpdate {
			t = &m.New
		}
	}
	if t == nil || len(t.Columns) != len(e.Rel.Columns) {
		return err
	}
	cands := candidateColumns(q, withColumn(q, err))
	if len(cands) == 0 {
		for i := range e.Rel.Columns {
			if e.Tcol[i] >= 0 {
				cands = append(cands, i)
			}
		}
	}
	sql := fmt.Sprintf(valueProbeSQL, e.Target.Quoted)
	for _, i := range cands {
		c := &t.Columns[i]
		if c.Kind != protocol.ColumnText && c.Kind != protocol.ColumnBinary {
			continue
		}
		tc := e.Column(i)
		format := int16(0)
		if c.Kind == protocol.ColumnBinary {
			format = 1
		}
		_, perr := a.catalog.PgConn().ExecParams(ctx, sql, [][]byte{[]byte(tc.Name), c.Data},
			[]uint32{compact.TextOID, tc.TypeOID}, []int16{0, format}, nil).Close()
		var probe *pgconn.PgError
		if errors.As(perr, &probe) && probe.Code == pgErr.Code {
			return &columnError{columns: []string{sqlgen.QuoteIdent(e.Rel.Columns[i].Name)}, typ: tc.TypeName,
				value: a.describeValue(ctx, tc, c), err: err}
		}
		if perr != nil && !errors.As(perr, &probe) {
			return err // the control connection failed: leave the error as it was
		}
	}
	return err
}

// candidateColumns returns the source columns a columnError in err names
// (quoted names, as withColumn writes them), in the relation's order.
func candidateColumns(q *pipeline.Stmt, err error) []int {
	var ce *columnError
	if !errors.As(err, &ce) {
		return nil
	}
	var idx []int
	for i, c := range q.Rel.Rel.Columns {
		if q.Rel.Tcol[i] >= 0 && slices.Contains(ce.columns, sqlgen.QuoteIdent(c.Name)) {
			idx = append(idx, i)
		}
	}
	return idx
}

// describeValue is valueShape of a value, a binary one read in its text
// form on the target first (its length and, for a number, its digits say
// more than its size in bytes).
func (a *applier) describeValue(ctx context.Context, tc *relmap.Column, c *protocol.TupleColumn) string {
	if c.Kind != protocol.ColumnBinary {
		return valueShape(c)
	}
	rr := a.catalog.PgConn().ExecParams(ctx,
		`SELECT pg_catalog.length(_v.t)::pg_catalog.text, pg_catalog."left"(_v.t, $2) FROM (SELECT $1::pg_catalog.text AS t) _v`,
		[][]byte{c.Data, []byte(fmt.Sprint(maxShapeDigits + 1))}, []uint32{tc.TypeOID, 23}, []int16{1, 0}, nil)
	var n, prefix []byte
	for rr.NextRow() {
		n, prefix = slices.Clone(rr.Values()[0]), slices.Clone(rr.Values()[1])
	}
	if _, err := rr.Close(); err != nil || n == nil {
		return valueShape(c)
	}
	if before, after, ok := numberShape(prefix); ok {
		return numberText(before, after)
	}
	return "a value of " + string(n) + " characters"
}

// maxShapeDigits bounds the digits valueShape counts as a number: a
// longer string of digits is described by its length only.
const maxShapeDigits = 1000

// valueShape describes a value for an error message without showing it:
// "a value of 12 characters", "a number with 7 digits before the decimal
// point and 3 after", "a binary value of 8 bytes".
func valueShape(c *protocol.TupleColumn) string {
	if c.Kind == protocol.ColumnBinary {
		return fmt.Sprintf("a binary value of %d bytes", len(c.Data))
	}
	if before, after, ok := numberShape(c.Data); ok {
		return numberText(before, after)
	}
	if !utf8.Valid(c.Data) {
		return fmt.Sprintf("a value of %d bytes", len(c.Data))
	}
	return fmt.Sprintf("a value of %d characters", utf8.RuneCount(c.Data))
}

func numberText(before, after int) string {
	if after == 0 {
		return fmt.Sprintf("a number with %d digits", before)
	}
	return fmt.Sprintf("a number with %d digits before the decimal point and %d after", before, after)
}

// numberShape counts the digits of a plain decimal number (an optional
// sign, digits, an optional point and digits; no exponent) before and
// after its point, leading zeros left out.
func numberShape(b []byte) (before, after int, ok bool) {
	s := strings.TrimSpace(string(b))
	s = strings.TrimLeft(s, "+-")
	if s == "" || len(s) > maxShapeDigits {
		return 0, 0, false
	}
	intPart, frac, _ := strings.Cut(s, ".")
	if intPart == "" && frac == "" {
		return 0, 0, false
	}
	for _, part := range []string{intPart, frac} {
		for _, r := range part {
			if r < '0' || r > '9' {
				return 0, 0, false
			}
		}
	}
	before = len(strings.TrimLeft(intPart, "0"))
	if before == 0 && frac == "" {
		before = 1 // zero
	}
	return before, len(frac), true
}

// isValueError reports whether the target rejected a value for its type:
// a data exception (SQLSTATE class 22: too long, out of range, invalid
// syntax), or a domain's CHECK constraint, which names the domain, not the
// column (a table's CHECK constraint names the relation and constraint and
// is not one).
func isValueError(e *pgconn.PgError) bool {
	return strings.HasPrefix(e.Code, "22") || e.Code == "23514" && strings.HasPrefix(e.Message, "value for domain ")
}

// unchecked reports whether err, of statement q, is a value error from the
// target (isValueError) on an INSERT, UPDATE or COPY whose value was not
// checked yet (checkValues): Run's retry then checks it.
func unchecked(q *pipeline.Stmt, err error) bool {
	var pgErr *pgconn.PgError
	if q == nil || q.Rel == nil || q.Rel.Target == nil || !errors.As(err, &pgErr) || !isValueError(pgErr) ||
		strings.Contains(pgErr.Message, "column") {
		return false
	}
	if q.Op != pipeline.OpInsert && q.Op != pipeline.OpUpdate && q.Op != pipeline.OpCopy {
		return false
	}
	var ce *columnError
	return !errors.As(err, &ce) || ce.value == ""
}
