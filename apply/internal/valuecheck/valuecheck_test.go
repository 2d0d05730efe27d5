package valuecheck

import (
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/protocol"
)

// TestShape: a rejected value is described by its length or digits,
// never shown.
func TestShape(t *testing.T) {
	for _, c := range []struct {
		kind byte
		data string
		want string
	}{
		{protocol.ColumnText, "ééééééééééé", "a value of 11 characters"},
		{protocol.ColumnText, "99999999999", "a number with 11 digits"},
		{protocol.ColumnText, "-0012345.678", "a number with 5 digits before the decimal point and 3 after"},
		{protocol.ColumnText, "0", "a number with 1 digits"},
		{protocol.ColumnText, "1e400", "a value of 5 characters"},
		{protocol.ColumnText, ".", "a value of 1 characters"},
		{protocol.ColumnText, "\xff\xfe", "a value of 2 bytes"},
		{protocol.ColumnBinary, "\x00\x00\x00\x00\x00\x00\x00\x01", "a binary value of 8 bytes"},
	} {
		if got := Shape(&protocol.TupleColumn{Kind: c.kind, Data: []byte(c.data)}); got != c.want {
			t.Errorf("%q: got %q, want %q", c.data, got, c.want)
		}
	}
}

// TestIsValueError: data exceptions and a domain's CHECK constraint are
// value errors; a table's CHECK constraint and other errors are not.
func TestIsValueError(t *testing.T) {
	for _, c := range []struct {
		code, msg string
		want      bool
	}{
		{"22001", "value too long for type character varying(3)", true},
		{"22003", "numeric field overflow", true},
		{"22P02", `invalid input syntax for type integer: "x"`, true},
		{"23514", `value for domain public.code violates check constraint "c"`, true},
		{"23514", `new row for relation "t" violates check constraint "c"`, false},
		{"23505", "duplicate key value violates unique constraint", false},
		{"42703", `column "x" does not exist`, false},
	} {
		if got := IsValueError(&pgconn.PgError{Code: c.code, Message: c.msg}); got != c.want {
			t.Errorf("%s %q: IsValueError = %v, want %v", c.code, c.msg, got, c.want)
		}
	}
}
