package apply

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/apply/internal/engine"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/testenv"
)

// TestExportedSnapshotXmaxBelowXmin makes PostgreSQL export a slot
// snapshot whose xmax is below its xmin, the form of the issue's
// "2863:2862:", and checks that the copy filter reads it the way the
// server does.
//
// The slot's snapshot builder (snapbuild.c) becomes consistent after three
// xl_running_xacts records, waiting after each for the transactions it
// lists; xmin comes from the last record's oldest running xid, xmax only
// moves past commits. The steps: transaction A holds xid X1 while the
// slot's creation logs record 1; B takes X2 and A commits, so record 2
// lists B; C takes X3 and B aborts, so record 3 lists C. The snapshot is
// then X3:X2: (X2 aborted, so nothing moved xmax past it).
func TestExportedSnapshotXmaxBelowXmin(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c := testenv.NewCluster(t, testenv.Options{Version: version})
		conn := func() *pgx.Conn {
			t.Helper()
			conn, err := c.Connect(ctx, "postgres")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { conn.Close(context.Background()) })
			return conn
		}
		watch := conn()
		if _, err := watch.Exec(ctx, `CREATE TABLE rows (xid xid8, who text)`); err != nil {
			t.Fatal(err)
		}
		// begin opens a transaction on a connection of its own that
		// holds an xid and a row tagged with it.
		begin := func(who string) (*pgx.Conn, uint64) {
			t.Helper()
			tx := conn()
			var xid string
			if _, err := tx.Exec(ctx, "BEGIN"); err != nil {
				t.Fatal(err)
			}
			if err := tx.QueryRow(ctx, `INSERT INTO rows VALUES (pg_current_xact_id(), $1) RETURNING xid::text`, who).Scan(&xid); err != nil {
				t.Fatal(err)
			}
			x, err := strconv.ParseUint(xid, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return tx, x
		}
		end := func(tx *pgx.Conn, how string) {
			t.Helper()
			if _, err := tx.Exec(ctx, how); err != nil {
				t.Fatal(err)
			}
		}
		// waitFor waits until the slot's creation waits for xid to end,
		// that is, it has read the xl_running_xacts record listing it.
		waitFor := func(xid uint64, created <-chan error) {
			t.Helper()
			for {
				var n int
				if err := watch.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'transactionid'
					AND transactionid::text = $1 AND NOT granted`, strconv.FormatUint(uint64(uint32(xid)), 10)).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n > 0 {
					return
				}
				select {
				case err := <-created:
					t.Fatalf("the slot was created before it waited for xid %d: %v", xid, err)
				case <-time.After(10 * time.Millisecond):
				}
			}
		}

		a, x1 := begin("a")
		repl, err := protocol.ConnectReplication(ctx, c.ReplicationConnString("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		defer repl.Close(context.Background())
		var info protocol.SlotInfo
		created := make(chan error, 1)
		go func() {
			var err error
			info, err = repl.CreateSlot(ctx, "snap", protocol.SlotOptions{Snapshot: "export", Temporary: true})
			created <- err
		}()
		waitFor(x1, created)
		b, x2 := begin("b")
		end(a, "COMMIT")
		waitFor(x2, created)
		cc, x3 := begin("c")
		end(b, "ROLLBACK")
		if err := <-created; err != nil {
			t.Fatal(err)
		}

		// Read the snapshot as the copy workers do, then commit C: its
		// row is not in the snapshot.
		imp := conn()
		if _, err := imp.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY; SET TRANSACTION SNAPSHOT '"+info.SnapshotName+"'"); err != nil {
			t.Fatal(err)
		}
		var text string
		if err := imp.QueryRow(ctx, "SELECT pg_catalog.pg_current_snapshot()::text").Scan(&text); err != nil {
			t.Fatal(err)
		}
		end(cc, "COMMIT")
		t.Logf("PostgreSQL %d exported %s (A=%d committed, B=%d aborted, C=%d running)", version, text, x1, x2, x3)
		if want := fmt.Sprintf("%d:%d:", x3, x2); text != want {
			t.Fatalf("exported snapshot %s, want %s: the steps did not produce xmax below xmin", text, want)
		}
		snap, err := engine.ParseSnapshot(text)
		if err != nil {
			t.Fatal(err)
		}

		// visible agrees with the server's own rule for every xid around.
		for x := x1 - 2; x <= x3+2; x++ {
			var pg bool
			if err := imp.QueryRow(ctx, "SELECT pg_visible_in_snapshot($1::text::xid8, pg_current_snapshot())", strconv.FormatUint(x, 10)).Scan(&pg); err != nil {
				t.Fatal(err)
			}
			if got := snap.Visible(uint32(x)); got != pg {
				t.Errorf("visible(%d) = %v in %s, PostgreSQL says %v", x, got, text, pg)
			}
		}

		// The filter skips a committed transaction's change exactly when
		// the copy holds its row: A's, not C's (taken as committed before
		// the copy point, so that only the snapshot decides).
		var copied []string
		rows, err := imp.Query(ctx, "SELECT who FROM rows ORDER BY who")
		if err == nil {
			copied, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(copied) != "[a]" {
			t.Fatalf("the snapshot holds rows %v, want [a]", copied)
		}
		f := engine.NewCopyFilter()
		f.Add(sqlgen.Rel{Schema: "public", Name: "a"}, &engine.CopiedTable{LSN: info.ConsistentPoint, Snap: snap})
		rels := relmap.NewCache(false)
		rels.PutRelation(&protocol.Relation{RelationID: 1, Namespace: "public", Name: "a"})
		for _, tc := range []struct {
			who  string
			xid  uint64
			held bool
		}{{"a", x1, true}, {"c", x3, false}} {
			if kept := f.Filter(rels, uint32(tc.xid), info.ConsistentPoint-1, &protocol.Insert{RelationID: 1}) != nil; kept == tc.held {
				t.Errorf("transaction %s (xid %d): filter kept its change: %v, want %v", tc.who, tc.xid, kept, !tc.held)
			}
		}
	})
}
