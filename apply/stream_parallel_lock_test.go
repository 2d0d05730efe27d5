package apply_test

import (
	"testing"
	"time"

	"github.com/walapply/walapply/testenv"
)

// TestParallelLockWait provokes a lock wait between the main connection
// and a parallel one that only the run loop could end: a REPLICA IDENTITY
// FULL table with two equal rows, a streamed transaction that updates one
// of them (applied as it streams, its target transaction left open), and a
// small transaction committed meanwhile that updates the other. On the
// source they touch different rows; on the target both pick the first
// one, so the main connection waits for the parallel one, which waits for
// the stream. The watch ends the parallel transaction, the small one is
// applied, and the streamed one falls back to the spill path and is applied
// at its commit; the tables end equal.
func TestParallelLockWait(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := parallelHarness(t, version, map[string]string{"logical_decoding_work_mem": "64kB"})
		h.both(`CREATE TABLE d (a int, b int)`, `ALTER TABLE d REPLICA IDENTITY FULL`, `INSERT INTO d VALUES (1, 1), (1, 1)`,
			`CREATE TABLE fill (id int PRIMARY KEY, v text)`)
		h.source(`CREATE PUBLICATION pub FOR TABLE d, fill`)
		h.createSlot("s")
		cfg, logs := h.streamConfig("s", "parallel", "pub")
		stop := h.runApplier(cfg)

		c1 := h.conn(true)
		h.run(c1, "BEGIN", `UPDATE d SET b = 2 WHERE ctid = (SELECT ctid FROM d LIMIT 1)`, rowsSQL("fill", 1, 2000, "t"))
		h.waitReplay("walapply s parallel 1", "d", time.Minute)
		h.source(`UPDATE d SET b = 3 WHERE ctid = (SELECT ctid FROM d OFFSET 1 LIMIT 1)`)
		h.waitLog(logs, time.Minute, "lock wait between the applier's connections")
		// The small transaction goes on: its commit follows the log line.
		for deadline := time.Now().Add(time.Minute); h.scalar(false, `SELECT count(*)::text FROM d WHERE b = 3`) != "1" && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
		h.expect(`SELECT b::text FROM d ORDER BY b`, "1", "3")
		h.run(c1, rowsSQL("fill", 2001, 3000, "t"), "COMMIT")
		h.waitCaughtUp("s", time.Minute)
		if err := stop(); err != nil {
			t.Fatalf("applier: %v", err)
		}
		h.compare(tableRows("d", ""))
		h.compare(tableRows("fill", ""))
		if logs.Count("cannot be applied as it streams") != 1 {
			t.Error("the streamed transaction did not fall back to the spill path")
		}
		if logs.Count("replayed a streamed transaction") != 1 {
			t.Error("the streamed transaction was not replayed from its spill file")
		}
	})
}
