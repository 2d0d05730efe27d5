package engine

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/apply/internal/pipeline"
	"github.com/walapply/walapply/apply/internal/sqlgen"
)

// columnError names the target column(s) a rejected value belongs to.
type columnError struct {
	columns []string // quoted
	typ     string   // the target type, as format_type writes it
	value   string   // the value's shape (valuecheck.Describe), once checked (valuecheck.go)
	err     error
}

func (e *columnError) Error() string {
	which := "column " + e.columns[0]
	if len(e.columns) > 1 {
		which = "one of columns " + strings.Join(e.columns, ", ")
	}
	if e.value != "" {
		return fmt.Sprintf("%s (%s on the target), %s: %v", which, e.typ, e.value, e.err)
	}
	return fmt.Sprintf("%s (%s on the target): %v", which, e.typ, e.err)
}

func (e *columnError) Unwrap() error { return e.err }

var (
	// "value too long for type character varying(3)", "invalid input
	// syntax for type integer: ...", "value "70000" is out of range for
	// type smallint".
	forTypeRE = regexp.MustCompile(`for type ([^:"]+?)(?::|$)`)
	// numeric field overflow's detail: "A field with precision 5, scale
	// 2 must round to ...".
	precisionRE = regexp.MustCompile(`precision (\d+), scale (\d+)`)
)

// paramRE finds the parameter PostgreSQL names in the context of an
// error converting it from its text or binary form (since PostgreSQL 13):
// `unnamed portal parameter $2 = '...'`, `portal "p" parameter $2`.
var paramRE = regexp.MustCompile(`parameter \$(\d+)\b`)

// copyColumnRE finds the column COPY FROM names in the context of a value
// it rejects: `COPY t, line 50, column w: "bad"` (the target's column name,
// unquoted).
var copyColumnRE = regexp.MustCompile(`^COPY .*, line \d+, column (.+?)(?:: |$)`)

// paramColumn returns the source column (its index) of the value an
// error's context names: the column a COPY names, or the parameter of a
// row statement whose parameters' columns are known (relmap.Entry.Params); -1
// otherwise.
func paramColumn(q *pipeline.Stmt, pgErr *pgconn.PgError) int {
	if m := copyColumnRE.FindStringSubmatch(pgErr.Where); m != nil {
		for i, ti := range q.Rel.Tcol {
			if ti >= 0 && q.Rel.Target.Columns[ti].Name == m[1] {
				return i
			}
		}
		return -1
	}
	m := paramRE.FindStringSubmatch(pgErr.Where)
	if m == nil {
		return -1
	}
	n, err := strconv.Atoi(m[1])
	names := q.Rel.Params[q.SQL]
	if err != nil || n < 1 || n > len(names) {
		return -1
	}
	for i, c := range q.Rel.Rel.Columns {
		if c.Name == names[n-1] && q.Rel.Tcol[i] >= 0 {
			return i
		}
	}
	return -1
}

// withColumn adds to a value error from the target (SQLSTATE class 22:
// too long, out of range, invalid syntax) the column it concerns: the one
// PostgreSQL names in the error's context (paramColumn: a value its type's
// input rejects, in a row statement's parameter or a COPY), else the
// column(s) of the failed statement's table that have the type the error
// names (a multi-row statement's casts, a length or range check: the
// error names no column then). PostgreSQL names a
// type there, not a column, and a user facing a table of dozens of columns
// needs the column to fix it. Other errors are returned unchanged.
func withColumn(q *pipeline.Stmt, err error) error {
	var pgErr *pgconn.PgError
	var named *columnError
	if q == nil || q.Rel == nil || q.Rel.Target == nil || !errors.As(err, &pgErr) ||
		!strings.HasPrefix(pgErr.Code, "22") || strings.Contains(pgErr.Message, "column") || errors.As(err, &named) {
		return err
	}
	if col := paramColumn(q, pgErr); col >= 0 {
		return &columnError{columns: []string{sqlgen.QuoteIdent(q.Rel.Rel.Columns[col].Name)}, typ: q.Rel.Target.Columns[q.Rel.Tcol[col]].TypeName, err: err}
	}
	typ := ""
	if m := forTypeRE.FindStringSubmatch(pgErr.Message); m != nil {
		typ = strings.TrimSpace(m[1])
	} else if m := precisionRE.FindStringSubmatch(pgErr.Detail); m != nil {
		typ = "numeric(" + m[1] + "," + m[2] + ")"
	}
	if typ == "" {
		return err
	}
	var cols []string
	for i, sc := range q.Rel.Rel.Columns {
		if ti := q.Rel.Tcol[i]; ti >= 0 && q.Rel.Target.Columns[ti].TypeName == typ {
			cols = append(cols, sqlgen.QuoteIdent(sc.Name))
		}
	}
	if len(cols) == 0 {
		return err
	}
	return &columnError{columns: cols, typ: typ, err: err}
}
