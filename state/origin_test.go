package state

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/testenv"
)

func TestOriginName(t *testing.T) {
	tests := []struct {
		applier string
		want    string // "" means an error
	}{
		{"main", "walapply_main"},
		{"Ünïcode-ok.1", "walapply_Ünïcode-ok.1"},
		{"with space", "walapply_with space"},
		{strings.Repeat("a", 54), "walapply_" + strings.Repeat("a", 54)},
		{strings.Repeat("a", 55), ""},
		{strings.Repeat("é", 27), "walapply_" + strings.Repeat("é", 27)}, // 54 bytes
		{strings.Repeat("é", 28), ""},                                    // 56 bytes
		{"", ""},
		{"tab\there", ""},
		{"nul\x00", ""},
		{"bad\xffutf8", ""},
	}
	for _, tt := range tests {
		got, err := OriginName(tt.applier)
		if tt.want == "" {
			if err == nil {
				t.Errorf("OriginName(%q) = %q, want an error", tt.applier, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("OriginName(%q) = %q, %v; want %q", tt.applier, got, err, tt.want)
		}
	}
}

func connect(t *testing.T, c *testenv.Cluster) *pgx.Conn {
	t.Helper()
	conn, err := c.Connect(context.Background(), "postgres")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func wantProgress(t *testing.T, q Querier, name string, want protocol.LSN) {
	t.Helper()
	for _, flush := range []bool{false, true} {
		got, exists, err := OriginProgress(context.Background(), q, name, flush)
		if err != nil || !exists || got != want {
			t.Fatalf("OriginProgress(flush=%v) = %s, %v, %v; want %s, true, nil", flush, got, exists, err, want)
		}
	}
}

func TestOrigin(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		c := testenv.NewCluster(t, testenv.Options{Version: version})
		ctx := context.Background()
		conn := connect(t, c)
		name, err := OriginName("it's \"quoted\"")
		if err != nil {
			t.Fatal(err)
		}

		if lsn, exists, err := OriginProgress(ctx, conn, name, true); err != nil || exists || lsn != 0 {
			t.Fatalf("progress of a missing origin = %s, %v, %v", lsn, exists, err)
		}

		// Concurrent creation from several sessions: all succeed, one origin.
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			other := connect(t, c)
			wg.Go(func() { errs[i] = EnsureOrigin(ctx, other, name) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("concurrent EnsureOrigin %d: %v", i, err)
			}
		}
		if err := EnsureOrigin(ctx, conn, name); err != nil {
			t.Fatalf("EnsureOrigin of an existing origin: %v", err)
		}
		var count int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_replication_origin WHERE roname = $1", name).Scan(&count); err != nil || count != 1 {
			t.Fatalf("origins named %q: %d, %v", name, count, err)
		}
		wantProgress(t, conn, name, protocol.InvalidLSN)

		if _, err := conn.Exec(ctx, "CREATE TABLE t (v int)"); err != nil {
			t.Fatal(err)
		}
		if err := SessionSetup(ctx, conn, name); err != nil {
			t.Fatal(err)
		}
		// One session at a time.
		other := connect(t, c)
		if err := SessionSetup(ctx, other, name); err == nil {
			t.Fatal("a second session set up the same origin")
		}

		commitTime := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
		// Commit: the origin moves to the transaction's end LSN.
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO t VALUES (1)"); err != nil {
			t.Fatal(err)
		}
		if err := xactSetup(ctx, tx, 0x1_0000_1000, commitTime); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		wantProgress(t, conn, name, 0x1_0000_1000)

		// Rollback after XactReset: neither the data nor the origin moves
		// (without the reset, 16 and later advance it: see
		// TestOriginAbortAdvances).
		tx, err = conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO t VALUES (2)"); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, XactSetupSQL, protocol.LSN(0x1_0000_2000).String(), commitTime); err != nil {
			t.Fatal(err)
		}
		if err := XactReset(ctx, tx); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		wantProgress(t, conn, name, 0x1_0000_1000)

		// A transaction that writes nothing but XactSetupSQL still commits
		// with a record, and so advances the origin (XactSetupSQL gives it
		// an xid); the bare advance does not.
		for _, c := range []struct {
			sql  string
			end  protocol.LSN
			want protocol.LSN
		}{{xactSetupCall, 0x1_0000_1800, 0x1_0000_1000}, {XactSetupSQL, 0x1_0000_1900, 0x1_0000_1900}} {
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, c.sql, c.end.String(), commitTime); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			wantProgress(t, conn, name, c.want)
		}
		if err := XactReset(ctx, conn); err != nil {
			t.Fatal(err)
		}

		// PREPARE TRANSACTION advances the origin like a commit, and a
		// standalone xact setup before COMMIT PREPARED advances it again.
		tx, err = conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO t VALUES (3)"); err != nil {
			t.Fatal(err)
		}
		if err := xactSetup(ctx, tx, 0x1_0000_3000, commitTime); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "PREPARE TRANSACTION 'origin_test'"); err != nil {
			t.Fatal(err)
		}
		wantProgress(t, conn, name, 0x1_0000_3000)
		if err := xactSetup(ctx, conn, 0x1_0000_3100, commitTime); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, "COMMIT PREPARED 'origin_test'"); err != nil {
			t.Fatal(err)
		}
		wantProgress(t, conn, name, 0x1_0000_3100)
		var rows int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&rows); err != nil || rows != 2 {
			t.Fatalf("rows in t: %d, %v; want 2", rows, err)
		}

		// An origin in use can be neither advanced nor dropped elsewhere.
		if err := AdvanceOrigin(ctx, other, name, 0x500); err == nil {
			t.Fatal("advanced an origin set up by another session")
		}
		if err := DropOrigin(ctx, other, name); err == nil {
			t.Fatal("dropped an origin set up by another session")
		}

		if err := SessionReset(ctx, conn); err != nil {
			t.Fatal(err)
		}
		if err := SessionReset(ctx, conn); err != nil {
			t.Fatalf("SessionReset without an origin set up: %v", err)
		}
		if err := SessionSetup(ctx, other, name); err != nil {
			t.Fatalf("setting up the origin after the first session reset it: %v", err)
		}
		if err := SessionReset(ctx, other); err != nil {
			t.Fatal(err)
		}

		// AdvanceOrigin moves the progress, backwards too, and is not undone
		// by a rollback.
		if err := AdvanceOrigin(ctx, conn, name, 0x500); err != nil {
			t.Fatal(err)
		}
		wantProgress(t, conn, name, 0x500)
		tx, err = conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := AdvanceOrigin(ctx, tx, name, 0x600); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		wantProgress(t, conn, name, 0x600)

		if err := DropOrigin(ctx, conn, name); err != nil {
			t.Fatal(err)
		}
		if _, exists, err := OriginProgress(ctx, conn, name, false); err != nil || exists {
			t.Fatalf("origin exists after DropOrigin: %v, %v", exists, err)
		}
		if err := DropOrigin(ctx, conn, name); err != nil {
			t.Fatalf("DropOrigin of a missing origin: %v", err)
		}
	})
}
