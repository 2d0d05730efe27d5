package apply_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/walapply/walapply/testenv"
)

// TestTwoPhaseCrashes: a crash of the applier, of the target, or of both
// servers while a transaction is prepared on the target; afterwards the
// outcome finishes it, the rows are exactly the source's, and nothing
// stays prepared.
func TestTwoPhaseCrashes(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		ctx := context.Background()
		setup := func(t *testing.T) *harness {
			h := newHarness(t, version, nil, nil)
			h.both(`CREATE TABLE t (id int PRIMARY KEY, v text)`)
			h.source(`CREATE PUBLICATION pub FOR TABLE t`)
			h.twoPhaseSlot("crash")
			return h
		}
		rows := tableRows("t", "")

		t.Run("kill-applier", func(t *testing.T) {
			h := setup(t)
			p := h.applierProcess("crash", "pub", "--two-phase")
			p.start()
			ga := gidOf(t, "crash", h.prepareOnSource("a", `INSERT INTO t VALUES (1, 'a'), (2, 'a')`))
			h.waitCaughtUp("crash", time.Minute)
			h.waitPrepared(time.Minute, ga)
			// Killed with the transaction prepared; its outcome comes while
			// the applier is down.
			p.kill()
			h.source(`COMMIT PREPARED 'a'`)
			gb := gidOf(t, "crash", h.prepareOnSource("b", `INSERT INTO t VALUES (3, 'b')`, `UPDATE t SET v = 'b' WHERE id = 1`))
			p.start()
			h.waitCaughtUp("crash", time.Minute)
			h.waitPrepared(time.Minute, gb)
			h.expect(rows, "(1,a)", "(2,a)")
			// Killed again; the outcome comes after the restart.
			p.kill()
			p.start()
			h.source(`ROLLBACK PREPARED 'b'`, `INSERT INTO t VALUES (4, 'c')`)
			h.waitCaughtUp("crash", time.Minute)
			h.waitPrepared(time.Minute)
			p.stop()
			h.expect(rows, "(1,a)", "(2,a)", "(4,c)")
			h.compare(rows)
		})

		t.Run("kill-applier-anytime", func(t *testing.T) {
			// SIGKILL at arbitrary moments, without waiting for anything:
			// during a PREPARE, between it and its outcome, during the outcome.
			h := setup(t)
			p := h.applierProcess("crash", "pub", "--two-phase")
			p.start()
			const n = 24
			for i := range n {
				gid := fmt.Sprintf("g%d", i)
				h.prepareOnSource(gid, fmt.Sprintf(`INSERT INTO t VALUES (%d, 'x')`, i), fmt.Sprintf(`UPDATE t SET v = 'p%d' WHERE id = %d`, i, i-1))
				if rand.IntN(3) == 0 {
					p.kill()
					p.start()
				}
				time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond)
				if i%3 == 2 {
					h.source("ROLLBACK PREPARED '" + gid + "'")
				} else {
					h.source("COMMIT PREPARED '" + gid + "'")
				}
				if rand.IntN(3) == 0 {
					p.kill()
					p.start()
				}
			}
			h.waitCaughtUp("crash", 2*time.Minute)
			h.waitPrepared(time.Minute)
			p.stop()
			if got := h.compare(rows); got != n-n/3 {
				t.Errorf("%d rows on the source, want %d", got, n-n/3)
			}
		})

		t.Run("stop-target", func(t *testing.T) {
			h := setup(t)
			cfg, _ := h.twoPhaseConfig("crash", "pub")
			stop := h.runApplier(cfg)
			ga := gidOf(t, "crash", h.prepareOnSource("a", `INSERT INTO t VALUES (1, 'a')`))
			h.waitCaughtUp("crash", time.Minute)
			h.waitPrepared(time.Minute, ga)
			if err := h.pair.Target.StopImmediate(ctx); err != nil {
				t.Fatal(err)
			}
			if err := h.pair.Target.Start(ctx); err != nil {
				t.Fatal(err)
			}
			h.waitPrepared(time.Minute, ga) // it survived the crash
			h.source(`COMMIT PREPARED 'a'`)
			gb := gidOf(t, "crash", h.prepareOnSource("b", `INSERT INTO t VALUES (2, 'b')`))
			h.waitCaughtUp("crash", 2*time.Minute)
			h.waitPrepared(time.Minute, gb)
			if err := h.pair.Target.StopImmediate(ctx); err != nil {
				t.Fatal(err)
			}
			h.source(`ROLLBACK PREPARED 'b'`, `INSERT INTO t VALUES (3, 'c')`)
			if err := h.pair.Target.Start(ctx); err != nil {
				t.Fatal(err)
			}
			h.waitCaughtUp("crash", 2*time.Minute)
			h.waitPrepared(time.Minute)
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			h.expect(rows, "(1,a)", "(3,c)")
			h.compare(rows)
		})

		t.Run("stop-both", func(t *testing.T) {
			h := setup(t)
			cfg, _ := h.twoPhaseConfig("crash", "pub")
			stop := h.runApplier(cfg)
			ga := gidOf(t, "crash", h.prepareOnSource("a", `INSERT INTO t VALUES (1, 'a')`))
			gb := gidOf(t, "crash", h.prepareOnSource("b", `INSERT INTO t VALUES (2, 'b')`))
			h.waitCaughtUp("crash", time.Minute)
			h.waitPrepared(time.Minute, ga, gb)
			for _, c := range []*testenv.Cluster{h.pair.Source, h.pair.Target} {
				if err := c.StopImmediate(ctx); err != nil {
					t.Fatal(err)
				}
			}
			for _, c := range []*testenv.Cluster{h.pair.Source, h.pair.Target} {
				if err := c.Start(ctx); err != nil {
					t.Fatal(err)
				}
			}
			h.source(`COMMIT PREPARED 'a'`, `ROLLBACK PREPARED 'b'`, `INSERT INTO t VALUES (3, 'c')`)
			h.waitCaughtUp("crash", 2*time.Minute)
			h.waitPrepared(time.Minute)
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			if got := h.preparedOn(h.pair.Source); len(got) != 0 {
				t.Errorf("prepared on the source: %q", got)
			}
			h.expect(rows, "(1,a)", "(3,c)")
			h.compare(rows)
		})
	})
}
