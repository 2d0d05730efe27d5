package engine

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/apply/internal/pipeline"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/apply/internal/valuecheck"
	"github.com/walapply/walapply/protocol"
)

// checking reports whether the transaction at hand is the one a retry
// stops at, applied change by change.
//
// Naming the column of a rejected value. PostgreSQL names a type, not a
// column, when a value does not fit its target column's type modifier
// ("value too long for type character varying(10)", "numeric field
// overflow"), and a multi-row statement names no parameter either. withColumn (column_error.go) narrows the
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
// the column refuses (internal/valuecheck): one query per candidate column
// on the control connection (the applying one is in the aborted
// transaction).
//
// The cost falls on the failure only: a round trip per change of the one
// transaction being checked, and one per candidate column. The error then
// names the column and the value's shape (valuecheck.Describe), never the
// value itself.
func (a *Applier) checking() bool {
	return a.noGroupThrough != 0 && a.txn.finalLSN == a.noGroupThrough
}

// checks reports whether msg, a change, is sent on its own (checking):
// an INSERT or UPDATE, whose values a column may refuse.
func (a *Applier) checks(msg protocol.Message) bool {
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
func (a *Applier) flushChange(ctx context.Context, msg protocol.Message) (*pipeline.Stmt, error) {
	failed, err := a.sess.Flush(ctx)
	if err != nil && a.checking() {
		err = a.checkValues(ctx, failed, msg, err)
	}
	return failed, err
}

// checkValues returns err with the column named whose value the target
// rejects, when err is a value error (valuecheck.IsValueError) of q, the
// statement of msg, an INSERT or UPDATE. Candidates are the columns
// withColumn narrows the error down to, else every column written; the
// first whose value alone the target rejects with the same SQLSTATE is
// named. Otherwise err is returned unchanged.
func (a *Applier) checkValues(ctx context.Context, q *pipeline.Stmt, msg protocol.Message, err error) error {
	var pgErr *pgconn.PgError
	if q == nil || q.Rel == nil || q.Rel.Target == nil || a.catalog == nil || !errors.As(err, &pgErr) || !valuecheck.IsValueError(pgErr) {
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
	for _, i := range cands {
		c := &t.Columns[i]
		if c.Kind != protocol.ColumnText && c.Kind != protocol.ColumnBinary {
			continue
		}
		tc := e.Column(i)
		refused, perr := valuecheck.Refuses(ctx, a.catalog.PgConn(), e.Target.Quoted, tc.Name, tc.TypeOID, c, pgErr.Code)
		if refused {
			return &columnError{columns: []string{sqlgen.QuoteIdent(e.Rel.Columns[i].Name)}, typ: tc.TypeName,
				value: valuecheck.Describe(ctx, a.catalog.PgConn(), tc.TypeOID, c), err: err}
		}
		if perr != nil {
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

// unchecked reports whether err, of statement q, is a value error from the
// target (valuecheck.IsValueError) on an INSERT, UPDATE or COPY whose value was not
// checked yet (checkValues): Run's retry then checks it.
func unchecked(q *pipeline.Stmt, err error) bool {
	var pgErr *pgconn.PgError
	if q == nil || q.Rel == nil || q.Rel.Target == nil || !errors.As(err, &pgErr) || !valuecheck.IsValueError(pgErr) ||
		strings.Contains(pgErr.Message, "column") {
		return false
	}
	if q.Op != pipeline.OpInsert && q.Op != pipeline.OpUpdate && q.Op != pipeline.OpCopy {
		return false
	}
	var ce *columnError
	return !errors.As(err, &ce) || ce.value == ""
}
