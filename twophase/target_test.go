package twophase

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/walapply/walapply/state"
	"github.com/walapply/walapply/testenv"
)

func TestStatementSQL(t *testing.T) {
	tests := []struct{ got, want string }{
		{PrepareSQL("g"), `PREPARE TRANSACTION E'g'`},
		{PrepareSQL(""), `PREPARE TRANSACTION E''`},
		{PrepareSQL(`it's \ ü`), `PREPARE TRANSACTION E'it''s \\ ü'`},
		{FinishSQL(`a'b`, true), `COMMIT PREPARED E'a''b'`},
		{FinishSQL(`a\b`, false), `ROLLBACK PREPARED E'a\\b'`},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %s, want %s", tt.got, tt.want)
		}
	}
}

// TestTargetOperations runs the target-side operations on a real server:
// the check of max_prepared_transactions, lookups in pg_prepared_xacts, and
// the two conditional origin setups around PREPARE TRANSACTION and its
// outcomes.
func TestTargetOperations(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		ctx := context.Background()
		off := testenv.NewCluster(t, testenv.Options{Version: version, Settings: map[string]string{"max_prepared_transactions": "0"}})
		c := testenv.NewCluster(t, testenv.Options{Version: version})
		offConn, err := off.Connect(ctx, "postgres")
		if err != nil {
			t.Fatal(err)
		}
		defer offConn.Close(ctx)
		if _, err := CheckTarget(ctx, offConn); !errors.Is(err, ErrNoPreparedTransactions) {
			t.Fatalf("CheckTarget with max_prepared_transactions = 0: %v", err)
		}
		conn, err := c.Connect(ctx, "postgres")
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if n, err := CheckTarget(ctx, conn); err != nil || n != 20 {
			t.Fatalf("CheckTarget = %d, %v; want 20", n, err)
		}
		exec := func(sqls ...string) {
			t.Helper()
			testenv.MustExecConn(t, ctx, conn, sqls...)
		}
		progress := func() string {
			t.Helper()
			var s *string
			if err := conn.QueryRow(ctx, "SELECT pg_replication_origin_progress('o', false)::text").Scan(&s); err != nil {
				t.Fatal(err)
			}
			if s == nil {
				return "none"
			}
			return *s
		}

		exec(`CREATE TABLE t (id int)`)
		for _, gid := range []string{"walapply_a_5", "walapply_a_1_6", "walapply_a_x", "walapply_ab_7", "other", `walapply_a_8`} {
			exec(`BEGIN`, `INSERT INTO t VALUES (1)`, PrepareSQL(gid))
		}
		list, err := ListApplier(ctx, conn, "a")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, p := range list {
			got = append(got, p.GID)
			if want, _ := ParseTargetGID("a", p.GID); p.SourceXid != want || p.Database != "postgres" || p.Prepared.IsZero() {
				t.Errorf("ListApplier row %+v", p)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, []string{"walapply_a_5", "walapply_a_8"}) {
			t.Errorf("ListApplier(a) = %q", got)
		}
		for gid, want := range map[string]bool{"other": true, "walapply_a_5": true, "nope": false, "": false} {
			if ok, err := IsPrepared(ctx, conn, gid); err != nil || ok != want {
				t.Errorf("IsPrepared(%q) = %v, %v; want %v", gid, ok, err, want)
			}
		}

		exec(`SELECT pg_replication_origin_create('o')`, `SELECT pg_replication_origin_session_setup('o')`)
		// A PREPARE under a GID in use fails; the origin was not set up, so
		// it does not move (PostgreSQL 16+ would advance it on the abort).
		exec(`BEGIN`, `INSERT INTO t VALUES (2)`)
		if _, err := conn.Exec(ctx, state.XactSetupUnlessPreparedSQL, "0/1000", "2025-01-01 00:00:00Z", "other"); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, PrepareSQL("other")); err == nil {
			t.Fatal("PREPARE TRANSACTION under a GID in use succeeded")
		}
		exec(`ROLLBACK`)
		if p := progress(); p != "none" {
			t.Errorf("the origin moved to %s on a PREPARE under a GID in use", p)
		}
		// Under a free GID, the PREPARE advances the origin.
		exec(`BEGIN`, `INSERT INTO t VALUES (3)`)
		if _, err := conn.Exec(ctx, state.XactSetupUnlessPreparedSQL, "0/2000", "2025-01-01 00:00:00Z", "mine"); err != nil {
			t.Fatal(err)
		}
		exec(PrepareSQL("mine"))
		if p := progress(); p != "0/2000" {
			t.Errorf("after PREPARE TRANSACTION the origin is at %s, want 0/2000", p)
		}
		// The outcome's setup happens only for a prepared GID.
		tag, err := conn.Exec(ctx, state.XactSetupIfPreparedSQL, "0/3000", "2025-01-01 00:00:00Z", "gone")
		if err != nil || tag.RowsAffected() != 0 {
			t.Fatalf("setup for a GID not prepared: %v, %v", tag, err)
		}
		tag, err = conn.Exec(ctx, state.XactSetupIfPreparedSQL, "0/4000", "2025-01-01 00:00:00Z", "mine")
		if err != nil || tag.RowsAffected() != 1 {
			t.Fatalf("setup for a prepared GID: %v, %v", tag, err)
		}
		exec(FinishSQL("mine", true))
		if p := progress(); p != "0/4000" {
			t.Errorf("after COMMIT PREPARED the origin is at %s, want 0/4000", p)
		}
		tag, err = conn.Exec(ctx, state.XactSetupIfPreparedSQL, "0/5000", "2025-01-01 00:00:00Z", "other")
		if err != nil || tag.RowsAffected() != 1 {
			t.Fatalf("setup for a prepared GID: %v, %v", tag, err)
		}
		exec(FinishSQL("other", false))
		if p := progress(); p != "0/5000" {
			t.Errorf("after ROLLBACK PREPARED the origin is at %s, want 0/5000", p)
		}
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 1 {
			t.Errorf("t has %d rows (%v), want 1: only the committed prepared transaction", n, err)
		}
		rows, _ := conn.Query(ctx, "SELECT gid FROM pg_prepared_xacts")
		left, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		for _, gid := range left {
			exec(FinishSQL(gid, false))
		}
	})
}
