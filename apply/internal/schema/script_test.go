package schema

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/rs/zerolog"
	"github.com/walapply/walapply/internal/testutil"
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

// TestRunPostData: an entry whose object exists already is logged and left
// alone; the first other failure stops the run, naming the entry and
// keeping the server's error.
func TestRunPostData(t *testing.T) {
	entries := []Entry{
		{Name: "accounts accounts_pkey", Kind: "CONSTRAINT", Schema: "app", SQL: "ALTER TABLE app.accounts ADD PRIMARY KEY (id);\n"},
		{Name: "accounts_balance", Kind: "INDEX", Schema: "app", SQL: "CREATE INDEX accounts_balance ON app.accounts (balance);\n"},
		{Name: "m fk", Kind: "FK CONSTRAINT", Schema: "Other Sch", SQL: "ALTER TABLE m ADD FOREIGN KEY (a) REFERENCES app.accounts;\n"},
		{Name: "touch", Kind: "TRIGGER", Schema: "app", SQL: "CREATE TRIGGER touch;\n"},
	}
	run := func(conn *fakeConn) (*testutil.LogBuffer, error) {
		jobs := make(chan Entry, len(entries))
		for _, e := range entries {
			jobs <- e
		}
		close(jobs)
		var log testutil.LogBuffer
		return &log, RunPostData(context.Background(), conn, jobs, zerolog.New(&log))
	}
	conn := &fakeConn{fail: map[string]*pgconn.PgError{entries[0].SQL: {Code: "42P16"}, entries[1].SQL: {Code: "42P07"}, entries[3].SQL: {Code: "42710"}}}
	log, err := run(conn)
	if err != nil {
		t.Fatal(err)
	}
	if len(conn.ran) != 4 || log.Count("already on the target, left alone") != 3 || log.Count(`"object":"app.accounts_balance"`, `"type":"INDEX"`) != 1 {
		t.Errorf("ran %q, logged %s", conn.ran, log)
	}
	conn = &fakeConn{fail: map[string]*pgconn.PgError{entries[2].SQL: {Severity: "ERROR", Code: "23503", Message: "violates foreign key"}}}
	_, err = run(conn)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "23503" || err.Error() != `--schema: creating fk constraint Other Sch.m fk from pg_dump's post-data: ERROR: violates foreign key (SQLSTATE 23503)` {
		t.Errorf("a failing entry: %v", err)
	}
	if len(conn.ran) != 3 {
		t.Errorf("ran %q after the failure, want it to stop there", conn.ran)
	}
}
