package schema

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestRunPreamble: a pg_dump preamble's settings run one by one, comments
// and blank lines left out, one the target does not know skipped, any
// other failure stops with the setting named.
func TestRunPreamble(t *testing.T) {
	pre := "--\n-- PostgreSQL database dump\n--\n\nSET statement_timeout = 0;\n  SET transaction_timeout = 0;\nSET lock_timeout = 0;\n"
	conn := &fakeConn{fail: map[string]*pgconn.PgError{"SET transaction_timeout = 0;": {Code: "42704"}}}
	if err := RunPreamble(context.Background(), conn, pre); err != nil {
		t.Fatal(err)
	}
	if want := []string{"SET statement_timeout = 0;", "SET transaction_timeout = 0;", "SET lock_timeout = 0;"}; !slices.Equal(conn.ran, want) {
		t.Errorf("ran %q, want %q", conn.ran, want)
	}
	conn = &fakeConn{fail: map[string]*pgconn.PgError{"SET lock_timeout = 0;": {Code: "22023", Message: "bad value"}}}
	err := RunPreamble(context.Background(), conn, pre)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), `session setting "SET lock_timeout = 0;" on the target`) {
		t.Errorf("a failing setting: %v", err)
	}
}
