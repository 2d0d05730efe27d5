package apply_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/testenv"
)

// TestParallelKill SIGKILLs an applier with --streaming parallel while a
// 100k-row transaction is applied as it streams: in the middle of the
// stream (the worker's target transaction open), right after the source's
// COMMIT (the stream's end still arriving, or the run loop waiting for the
// worker's commit in commit order), and right after the target shows the
// transaction. Nothing partial is ever visible, and afterwards the target
// has exactly the source's rows.
func TestParallelKill(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: streams 100k rows and kills the applier")
	}
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := parallelHarness(t, version, map[string]string{"logical_decoding_work_mem": "64kB"})
		h.both(`CREATE TABLE big (id int PRIMARY KEY, v text)`)
		h.source(`CREATE PUBLICATION big FOR TABLE big`)
		h.createSlot("big")
		p := h.applierProcess("big", "big", "--streaming", "parallel")
		p.start()
		src := h.conn(true)
		count := `SELECT count(*)::text FROM big`

		// Kill 1: in the middle of the stream.
		h.run(src, "BEGIN", rowsSQL("big", 1, 30000, "k"))
		h.waitReplay("walapply big parallel 1", "big", 2*time.Minute)
		p.kill()
		h.expect(count, "0")
		p.start()
		h.waitReplay("walapply big parallel 1", "big", 2*time.Minute)

		// Kill 2: right after the source's commit.
		h.run(src, rowsSQL("big", 30001, 100000, "k"), "COMMIT")
		p.kill()
		if n := h.scalar(false, count); n != "0" && n != "100000" {
			t.Fatalf("after a kill at the commit the target has %s rows, want 0 or 100000", n)
		}
		p.start()

		// Kill 3: right after the target shows it.
		deadline := time.Now().Add(3 * time.Minute)
		for h.scalar(false, count) != "100000" {
			if time.Now().After(deadline) {
				t.Fatal("the transaction did not reach the target")
			}
			time.Sleep(2 * time.Millisecond)
		}
		p.kill()
		h.run(src, `UPDATE big SET v = 'after' WHERE id % 1000 = 0`)
		p.start()
		h.waitCaughtUp("big", 3*time.Minute)
		p.stop()
		h.expect(`SELECT count(*)::text || ' ' || count(DISTINCT id)::text || ' ' || min(id)::text || ' ' || max(id)::text FROM big`, "100000 100000 1 100000")
		sum := `SELECT md5(string_agg(id::text || ':' || v, ',' ORDER BY id)) FROM big`
		if s, d := h.scalar(true, sum), h.scalar(false, sum); s != d {
			t.Errorf("source and target rows differ: md5 %s on the source, %s on the target", s, d)
		}
	})
}

// TestParallelCrashAfterCommit ends the session right after a worker
// committed a streamed transaction and before the applier's origin
// followed it: the next session starts from the worker's origin, so the
// transaction is not applied twice (an insert of the same keys would fail)
// and the next one is applied once.
func TestParallelCrashAfterCommit(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := parallelHarness(t, version, map[string]string{"logical_decoding_work_mem": "64kB"})
		h.both(`CREATE TABLE c (id int PRIMARY KEY, v text)`)
		h.source(`CREATE PUBLICATION pub FOR TABLE c`)
		h.createSlot("s")
		cfg, logs := h.streamConfig("s", "parallel", "pub")
		var crashed atomic.Int32
		apply.SetParallelCommitted(&cfg, func(uint32) error {
			if crashed.Add(1) == 1 {
				return fmt.Errorf("simulated crash after the worker's commit: %w", &pgconn.PgError{Code: "08006", Message: "connection lost"})
			}
			return nil
		})
		stop := h.runApplier(cfg)
		h.source(rowsSQL("c", 1, 3000, "first"))
		h.waitCaughtUp("s", time.Minute)
		h.source(rowsSQL("c", 3001, 6000, "second"))
		h.waitCaughtUp("s", time.Minute)
		if err := stop(); err != nil {
			t.Fatalf("applier: %v", err)
		}
		if crashed.Load() < 2 {
			t.Fatalf("the hook ran %d times, want 2", crashed.Load())
		}
		if n := logs.Count("the applier's origin follows a streamed transaction committed on a parallel connection"); n != 1 {
			t.Errorf("%d repairs of the applier's origin logged, want 1", n)
		}
		h.expect(`SELECT count(*)::text || ' ' || count(DISTINCT id)::text FROM c`, "6000 6000")
		h.compare(tableRows("c", ""))
	})
}

// TestParallelServerCrash stops the target, then the source, immediately
// while a streamed transaction is applied as it streams, and the target
// once more right after it shows the transaction; the applier reconnects
// each time, and afterwards the target has exactly the source's rows.
func TestParallelServerCrash(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := parallelHarness(t, version, map[string]string{"logical_decoding_work_mem": "64kB"})
		h.both(`CREATE TABLE big (id int PRIMARY KEY, v text)`)
		h.source(`CREATE PUBLICATION pub FOR TABLE big`)
		h.createSlot("s")
		cfg, _ := h.streamConfig("s", "parallel", "pub")
		stop := h.runApplier(cfg)
		crash := func(c *testenv.Cluster) {
			t.Helper()
			if err := c.StopImmediate(h.ctx); err != nil {
				t.Fatal(err)
			}
			if err := c.Start(h.ctx); err != nil {
				t.Fatal(err)
			}
		}
		count := `SELECT count(*)::text FROM big`

		src := h.conn(true)
		h.run(src, "BEGIN", rowsSQL("big", 1, 5000, "k"))
		h.waitReplay("walapply s parallel 1", "big", time.Minute)
		crash(h.pair.Target)
		h.expect(count, "0")
		h.run(src, rowsSQL("big", 5001, 10000, "k"), "COMMIT")
		h.waitCaughtUp("s", 2*time.Minute)

		src2, err := h.pair.Source.Connect(h.ctx, "postgres")
		if err != nil {
			t.Fatal(err)
		}
		h.run(src2, "BEGIN", rowsSQL("big", 10001, 15000, "k"))
		h.waitReplay("walapply s parallel 1", "big", time.Minute)
		src2.Close(h.ctx)
		crash(h.pair.Source) // the open transaction is lost with it
		h.run(h.conn(true), rowsSQL("big", 15001, 20000, "k"))
		deadline := time.Now().Add(2 * time.Minute)
		for h.scalar(false, count) != "15000" {
			if time.Now().After(deadline) {
				t.Fatal("the last transaction did not reach the target")
			}
			time.Sleep(2 * time.Millisecond)
		}
		crash(h.pair.Target)
		h.waitCaughtUp("s", 2*time.Minute)
		if err := stop(); err != nil {
			t.Fatalf("applier: %v", err)
		}
		h.expect(`SELECT count(*)::text || ' ' || count(DISTINCT id)::text FROM big`, "15000 15000")
		h.compare(tableRows("big", ""))
	})
}
