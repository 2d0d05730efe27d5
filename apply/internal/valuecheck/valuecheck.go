// Package valuecheck finds out, after the target rejected a value, whether
// one value of a change is the one its column refuses, and describes a
// value for an error message without showing it.
//
// PostgreSQL names a type, not a column, when a value does not fit its
// target column's type modifier, and by the time the error arrives the
// batch that held the value is gone; apply's retry applies the failed
// transaction change by change and asks this package about each candidate
// column (apply/internal/engine/valuecheck.go). The question goes to the target itself
// (Refuses), which assigns the value to the column's type, modifier
// included, by its own input functions: that gives PostgreSQL's exact rule
// for every type (varchar and char with trailing spaces, bit, numeric
// rounding, domains, the target's encoding) without knowing any of them. A
// plain cast would not do: an explicit cast to varchar(10) truncates
// silently; json_populate_record assigns as an INSERT does.
//
// The answer names the value's shape (Shape, Describe): its length, or for
// a number its digits, never the value itself, which may be a secret. The
// package talks to the target through Conn, the one call of
// *pgconn.PgConn it needs, on a connection outside the failed transaction.
package valuecheck

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/apply/internal/compact"
	"github.com/walapply/walapply/protocol"
)

// Conn is the part of *pgconn.PgConn the probes need.
type Conn interface {
	ExecParams(ctx context.Context, sql string, paramValues [][]byte, paramOIDs []uint32, paramFormats []int16, resultFormats []int16) *pgconn.ResultReader
}

// IsValueError reports whether the target rejected a value for its type:
// a data exception (SQLSTATE class 22: too long, out of range, invalid
// syntax), or a domain's CHECK constraint, which names the domain, not the
// column (a table's CHECK constraint names the relation and constraint and
// is not one).
func IsValueError(e *pgconn.PgError) bool {
	return strings.HasPrefix(e.Code, "22") || e.Code == "23514" && strings.HasPrefix(e.Message, "value for domain ")
}

// probeSQL assigns $2, a value of the column $1's type (without its
// modifier), to that column of the table's row type as an INSERT would:
// json_populate_record runs the column type's input function with the
// column's modifier, which raises the error the statement raised when the
// value does not fit.
const probeSQL = `SELECT pg_catalog.json_populate_record(NULL::%s, pg_catalog.json_build_object($1::pg_catalog.text, $2::pg_catalog.text)) IS NULL`

// Refuses reports whether the target rejects value c (text or binary) of
// column column, of type typeOID, of table (quoted, schema-qualified) with
// SQLSTATE code. Its error is a failure of conn itself, not the target's
// answer: the caller then knows nothing more.
func Refuses(ctx context.Context, conn Conn, table, column string, typeOID uint32, c *protocol.TupleColumn, code string) (bool, error) {
	format := int16(0)
	if c.Kind == protocol.ColumnBinary {
		format = 1
	}
	_, err := conn.ExecParams(ctx, fmt.Sprintf(probeSQL, table), [][]byte{[]byte(column), c.Data},
		[]uint32{compact.TextOID, typeOID}, []int16{0, format}, nil).Close()
	var probe *pgconn.PgError
	if errors.As(err, &probe) {
		return probe.Code == code, nil
	}
	return false, err
}

// Describe is Shape of value c of type typeOID, a binary one read in its
// text form on the target first (its length and, for a number, its digits
// say more than its size in bytes).
func Describe(ctx context.Context, conn Conn, typeOID uint32, c *protocol.TupleColumn) string {
	if c.Kind != protocol.ColumnBinary {
		return Shape(c)
	}
	rr := conn.ExecParams(ctx,
		`SELECT pg_catalog.length(_v.t)::pg_catalog.text, pg_catalog."left"(_v.t, $2) FROM (SELECT $1::pg_catalog.text AS t) _v`,
		[][]byte{c.Data, []byte(fmt.Sprint(maxShapeDigits + 1))}, []uint32{typeOID, 23}, []int16{1, 0}, nil)
	var n, prefix []byte
	for rr.NextRow() {
		n, prefix = slices.Clone(rr.Values()[0]), slices.Clone(rr.Values()[1])
	}
	if _, err := rr.Close(); err != nil || n == nil {
		return Shape(c)
	}
	if before, after, ok := numberShape(prefix); ok {
		return numberText(before, after)
	}
	return "a value of " + string(n) + " characters"
}

// maxShapeDigits bounds the digits Shape counts as a number: a longer
// string of digits is described by its length only.
const maxShapeDigits = 1000

// Shape describes a value for an error message without showing it:
// "a value of 12 characters", "a number with 7 digits before the decimal
// point and 3 after", "a binary value of 8 bytes".
func Shape(c *protocol.TupleColumn) string {
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
