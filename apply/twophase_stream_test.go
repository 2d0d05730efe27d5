package apply_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/walapply/walapply/testenv"
)

// TestTwoPhaseStreamed: large prepared transactions are streamed while in
// progress, spilled, and replayed and prepared at Stream Prepare; then
// committed or rolled back, also across a restart of the applier.
func TestTwoPhaseStreamed(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, streamSettings(version), nil)
		h.both(`CREATE TABLE t (id int PRIMARY KEY, pad text)`)
		h.source(`CREATE PUBLICATION pub FOR TABLE t`)
		h.twoPhaseSlot("big")
		cfg, _ := h.streamConfig("big", "on", "pub")
		cfg.TwoPhase = true
		stop := h.runApplier(cfg)
		rows := tableRows("t", "id, length(pad)")
		ins := func(from, to int) string {
			return `INSERT INTO t SELECT g, repeat('x', 100) FROM generate_series(` + strconv.Itoa(from) + `, ` + strconv.Itoa(to) + `) g`
		}

		// Streamed, prepared, committed.
		g1 := gidOf(t, "big", h.prepareOnSource("s1", ins(1, 3000), `UPDATE t SET pad = 'u' WHERE id <= 10`))
		h.waitCaughtUp("big", time.Minute)
		h.waitPrepared(time.Minute, g1)
		if n, _ := strconv.Atoi(h.streamedTxns("big")); n < 1 {
			t.Fatalf("the source streamed %d transactions; the test needs streaming", n)
		}
		h.expect("SELECT count(*)::text FROM t", "0")
		h.source(`COMMIT PREPARED 's1'`)
		h.waitCaughtUp("big", time.Minute)
		h.waitPrepared(time.Minute)

		// Streamed with subtransactions rolled back, prepared, rolled back.
		g2 := gidOf(t, "big", h.prepareOnSource("s2", ins(3001, 5000), `SAVEPOINT a`, ins(5001, 6000),
			`ROLLBACK TO SAVEPOINT a`, `DELETE FROM t WHERE id <= 100`))
		h.waitCaughtUp("big", time.Minute)
		h.waitPrepared(time.Minute, g2)
		h.source(`ROLLBACK PREPARED 's2'`)

		// Streamed with a subtransaction rolled back, prepared; the applier
		// restarts before the commit.
		g3 := gidOf(t, "big", h.prepareOnSource("s3", ins(6001, 8000), `SAVEPOINT a`, ins(8001, 9000),
			`ROLLBACK TO SAVEPOINT a`, `SAVEPOINT b`, `DELETE FROM t WHERE id <= 5`, `RELEASE SAVEPOINT b`))
		h.waitCaughtUp("big", time.Minute)
		h.waitPrepared(time.Minute, g3)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		stop = h.runApplier(cfg)
		h.source(`COMMIT PREPARED 's3'`)
		h.waitCaughtUp("big", time.Minute)
		h.waitPrepared(time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		h.expect("SELECT count(*)::text FROM t", strconv.Itoa(3000-5+2000))
		h.compare(rows)
		t.Logf("PostgreSQL %d: %s transactions streamed", version, h.streamedTxns("big"))
	})
}
