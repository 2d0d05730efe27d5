package state

import (
	"context"
	"testing"
	"time"

	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/testenv"
)

// TestOriginAbortAdvances pins down the behaviour described under "Aborts
// advance the origin" in the package documentation: from PostgreSQL 16 on,
// a rolled-back transaction that ran XactSetupSQL advances the origin, and
// XactReset before the rollback, or moving the progress back afterwards,
// prevents or repairs it. If a PostgreSQL release changes this, the test says
// so, and the documentation and the apply code must follow.
func TestOriginAbortAdvances(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		c := testenv.NewCluster(t, testenv.Options{Version: version})
		ctx := context.Background()
		conn := connect(t, c)
		name, _ := OriginName("abort")
		if err := EnsureOrigin(ctx, conn, name); err != nil {
			t.Fatal(err)
		}
		if err := SessionSetup(ctx, conn, name); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, "CREATE TABLE t (v int PRIMARY KEY)"); err != nil {
			t.Fatal(err)
		}
		// txn runs an insert of v with the origin set up for end, then
		// rolls back; with reset, XactReset runs first.
		txn := func(v int, end protocol.LSN, commit, reset bool) {
			t.Helper()
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, "INSERT INTO t VALUES ($1)", v); err != nil {
				t.Fatal(err)
			}
			if err := xactSetup(ctx, tx, end, time.Now()); err != nil {
				t.Fatal(err)
			}
			if reset {
				if err := XactReset(ctx, tx); err != nil {
					t.Fatal(err)
				}
			}
			if commit {
				if err := tx.Commit(ctx); err != nil {
					t.Fatal(err)
				}
			} else if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
		}
		txn(1, 0x1000, true, false)
		wantProgress(t, conn, name, 0x1000)

		txn(2, 0x2000, false, true)
		wantProgress(t, conn, name, 0x1000)

		txn(3, 0x3000, false, false)
		if version >= 16 {
			wantProgress(t, conn, name, 0x3000)
		}
		// The repair moves the progress back, with the session's origin
		// set up again; where nothing moved, it does nothing.
		wantFrom := protocol.LSN(0x1000)
		if version >= 16 {
			wantFrom = 0x3000
		}
		if from, err := RewindOrigin(ctx, conn, name, 0x1000, true); err != nil || from != wantFrom {
			t.Fatalf("RewindOrigin = %s, %v; want %s", from, err, wantFrom)
		}
		wantProgress(t, conn, name, 0x1000)
		var setUp bool
		if err := conn.QueryRow(ctx, "SELECT pg_replication_origin_session_is_setup()").Scan(&setUp); err != nil || !setUp {
			t.Fatalf("after RewindOrigin with setup the session's origin is set up: %v, %v", setUp, err)
		}

		// The session variables outlive the transaction: xactSetup in a
		// transaction without an xid writes no record, and a later abort
		// without xactSetup uses the position still set (on 16 and later),
		// unless XactReset cleared it.
		abortWithoutSetup := func(v int) {
			t.Helper()
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO t VALUES ($1)", v); err != nil {
				t.Fatal(err)
			}
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := xactSetup(ctx, conn, 0x5000, time.Now()); err != nil {
			t.Fatal(err)
		}
		abortWithoutSetup(5)
		if version >= 16 {
			wantProgress(t, conn, name, 0x5000)
			if err := SessionReset(ctx, conn); err != nil {
				t.Fatal(err)
			}
			if err := AdvanceOrigin(ctx, conn, name, 0x1000); err != nil {
				t.Fatal(err)
			}
			if err := SessionSetup(ctx, conn, name); err != nil {
				t.Fatal(err)
			}
		}
		wantProgress(t, conn, name, 0x1000)
		if err := xactSetup(ctx, conn, 0x6000, time.Now()); err != nil {
			t.Fatal(err)
		}
		if err := XactReset(ctx, conn); err != nil {
			t.Fatal(err)
		}
		abortWithoutSetup(6)
		wantProgress(t, conn, name, 0x1000)
		var rows int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&rows); err != nil || rows != 1 {
			t.Fatalf("rows in t: %d, %v; want 1", rows, err)
		}

		// A COMMIT that fails on a deferred constraint after xactSetup
		// advances the origin on 16 and later; SET CONSTRAINTS ALL
		// IMMEDIATE before xactSetup makes the same failure happen first.
		if _, err := conn.Exec(ctx, "CREATE TABLE d (v int UNIQUE DEFERRABLE INITIALLY DEFERRED)"); err != nil {
			t.Fatal(err)
		}
		failingCommit := func(end protocol.LSN, immediate bool) {
			t.Helper()
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, "INSERT INTO d VALUES (1), (1)"); err != nil {
				t.Fatal(err)
			}
			if immediate {
				if _, err := tx.Exec(ctx, "SET CONSTRAINTS ALL IMMEDIATE"); err == nil {
					t.Fatal("SET CONSTRAINTS ALL IMMEDIATE passed a duplicate")
				}
				return // xactSetup is never reached
			}
			if err := xactSetup(ctx, tx, end, time.Now()); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(ctx); err == nil {
				t.Fatal("COMMIT passed a duplicate")
			}
		}
		failingCommit(0x7000, true)
		wantProgress(t, conn, name, 0x1000)
		failingCommit(0x8000, false)
		if version >= 16 {
			wantProgress(t, conn, name, 0x8000)
		} else {
			wantProgress(t, conn, name, 0x1000)
		}
		// Without setup, the rewind leaves the session without the origin,
		// for another session to take.
		if _, err := RewindOrigin(ctx, conn, name, 0x1000, false); err != nil {
			t.Fatal(err)
		}
		wantProgress(t, conn, name, 0x1000)
		if err := conn.QueryRow(ctx, "SELECT pg_replication_origin_session_is_setup()").Scan(&setUp); err != nil || setUp {
			t.Fatalf("after RewindOrigin without setup the session's origin is set up: %v, %v", setUp, err)
		}

		// A session that disconnects inside a transaction after xactSetup:
		// its abort at exit advances the origin on 16 and later.
		gone := connect(t, c)
		var pid uint32
		if err := gone.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			t.Fatal(err)
		}
		if err := SessionSetup(ctx, gone, name); err != nil {
			t.Fatal(err)
		}
		testenv.MustExecConn(t, ctx, gone, "BEGIN", "INSERT INTO t VALUES (9)")
		if err := xactSetup(ctx, gone, 0x9000, time.Now()); err != nil {
			t.Fatal(err)
		}
		gone.Close(ctx)
		for {
			var alive bool
			if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)", pid).Scan(&alive); err != nil {
				t.Fatal(err)
			}
			if !alive {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if version >= 16 {
			wantProgress(t, conn, name, 0x9000)
		} else {
			wantProgress(t, conn, name, 0x1000)
		}

		// On every version, a commit without xactSetup records the
		// position still set on the session.
		if err := AdvanceOrigin(ctx, conn, name, 0x1000); err != nil {
			t.Fatal(err)
		}
		if err := SessionSetup(ctx, conn, name); err != nil {
			t.Fatal(err)
		}
		if err := xactSetup(ctx, conn, 0xa000, time.Now()); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, "INSERT INTO t VALUES (10)"); err != nil {
			t.Fatal(err)
		}
		wantProgress(t, conn, name, 0xa000)
	})
}
