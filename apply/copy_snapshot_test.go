package apply_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/internal/testutil"
	"github.com/walapply/walapply/testenv"
)

// TestCopyXmaxBelowXmin runs `--copy` while transactions start and end
// around the slot's creation so that its exported snapshot has xmax below
// xmin (see TestExportedSnapshotXmaxBelowXmin for the steps): the copy
// takes it, and the target ends with exactly the source's rows: the row of
// the transaction that committed before the snapshot from the copy, the
// one that committed after it from the stream, none of the aborted one.
func TestCopyXmaxBelowXmin(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, nil)
		h.both(`CREATE TABLE t (id int PRIMARY KEY, who text)`)
		h.source(`CREATE PUBLICATION pub FOR TABLE t`, `INSERT INTO t VALUES (0, 'before')`)
		ctx, cancel := context.WithTimeout(h.ctx, time.Minute)
		defer cancel()
		conn := func() *pgx.Conn {
			t.Helper()
			c, err := h.pair.Source.Connect(ctx, "postgres")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close(context.Background()) })
			return c
		}
		watch := conn()
		// begin opens a transaction that writes a row and so holds an xid.
		begin := func(id int, who string) (*pgx.Conn, string) {
			t.Helper()
			c := conn()
			var xid string
			if _, err := c.Exec(ctx, "BEGIN"); err != nil {
				t.Fatal(err)
			}
			if err := c.QueryRow(ctx, `INSERT INTO t VALUES ($1, $2) RETURNING pg_current_xact_id()::text`, id, who).Scan(&xid); err != nil {
				t.Fatal(err)
			}
			return c, xid
		}
		end := func(c *pgx.Conn, how string) {
			t.Helper()
			if _, err := c.Exec(ctx, how); err != nil {
				t.Fatal(err)
			}
		}
		// waitFor waits until a backend (the slot's creation) waits for
		// the transaction xid (below 2^32 in a new cluster) to end.
		waitFor := func(xid string) {
			t.Helper()
			for {
				var n int
				if err := watch.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'transactionid' AND transactionid::text = $1 AND NOT granted`, xid).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n > 0 {
					return
				}
				if err := h.applierStopped(); err != nil {
					t.Fatalf("the applier stopped: %v", err)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}

		a, x1 := begin(1, "a")
		log := &testutil.LogBuffer{}
		cfg := h.secConfig("s", "pub", log)
		cfg.Copy = true
		stop := h.runApplier(cfg)
		waitFor(x1)
		b, x2 := begin(2, "b")
		end(a, "COMMIT")
		waitFor(x2)
		c, x3 := begin(3, "c")
		end(b, "ROLLBACK")
		for !strings.Contains(log.String(), "created replication slot with an exported snapshot") {
			if err := h.applierStopped(); err != nil {
				t.Fatalf("the applier stopped: %v", err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		end(c, "COMMIT")
		h.waitCopyDone(time.Minute, nil)
		h.source(`INSERT INTO t VALUES (4, 'after')`)
		h.waitCaughtUp("s", time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		snap := h.rows(h.pair.Target, `SELECT snapshot FROM walapply.copy_state`)
		t.Logf("PostgreSQL %d: A=%s committed, B=%s aborted, C=%s committed after; the copy's snapshot: %v", version, x1, x2, x3, snap)
		if len(snap) != 1 || snap[0] != x3+":"+x2+":" {
			t.Errorf("the copy's snapshot is %v, want %s:%s: (xmax below xmin)", snap, x3, x2)
		}
		if n := h.compare(tableRows("t", "")); n != 4 {
			t.Errorf("%d rows compared, want 4 (before, a, c, after)", n)
		}
	})
}
