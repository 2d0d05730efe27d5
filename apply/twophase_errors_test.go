package apply_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/testenv"
	"github.com/walapply/walapply/twophase"
)

// TestTwoPhasePrepareFails: a PREPARE TRANSACTION that the target refuses
// (its GID in use; no free prepared-transaction slot) stops the applier
// with an error that says what to do, and leaves the origin where it was,
// although from PostgreSQL 16 on the abort of a transaction that had set
// the origin up advances it; once the target is fixed, a restart applies
// the transaction.
func TestTwoPhasePrepareFails(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, map[string]string{"max_prepared_transactions": "1"})
		h.both(`CREATE TABLE t (id int PRIMARY KEY)`)
		h.source(`CREATE PUBLICATION pub FOR TABLE t`)
		h.twoPhaseSlot("pf")
		cfg, logs := h.twoPhaseConfig("pf", "pub")
		cfg.GIDMode = twophase.GIDModeSource
		stop := h.runApplier(cfg)
		h.source(`INSERT INTO t VALUES (1)`)
		h.waitCaughtUp("pf", time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		before := h.originProgress("pf")

		// The GID is in use on the target.
		h.target(`BEGIN`, `PREPARE TRANSACTION 'dup'`)
		h.prepareOnSource("dup", `INSERT INTO t VALUES (2)`)
		err := runUntilError(t, cfg)
		var te *apply.TxnError
		if !errors.As(err, &te) || !strings.Contains(err.Error(), "PREPARE TRANSACTION") || !strings.Contains(err.Error(), "already prepared on the target") || apply.IsTransient(err) {
			t.Fatalf("GID in use: want a permanent error about the GID, got %v", err)
		}
		t.Logf("GID in use: %v", err)
		if after := h.originProgress("pf"); after != before {
			t.Errorf("GID in use: the origin moved from %s to %s", before, after)
		}

		// No free slot: the origin was set up when PREPARE failed.
		h.target(`ROLLBACK PREPARED 'dup'`, `BEGIN`, `PREPARE TRANSACTION 'other'`)
		err = runUntilError(t, cfg)
		if !strings.Contains(err.Error(), "max_prepared_transactions") || apply.IsTransient(err) {
			t.Fatalf("no free slot: want a permanent error naming max_prepared_transactions, got %v", err)
		}
		t.Logf("no free slot: %v", err)
		if after := h.originProgress("pf"); after != before {
			t.Errorf("no free slot: the origin moved from %s to %s", before, after)
		}
		// Moved back once, by the repair of the failed PREPARE, not first
		// by the one of a failed COMMIT.
		if version >= 16 && (logs.Count("moved the origin back") != 1 || logs.Count("moved the origin back after a failed PREPARE TRANSACTION") != 1) {
			t.Errorf("PostgreSQL %d advances the origin on abort, but the applier did not move it back once after the failed PREPARE: %d times, %d after the PREPARE",
				version, logs.Count("moved the origin back"), logs.Count("moved the origin back after a failed PREPARE TRANSACTION"))
		}

		// Fixed: the transaction is applied.
		h.target(`ROLLBACK PREPARED 'other'`)
		stop = h.runApplier(cfg)
		h.waitCaughtUp("pf", time.Minute)
		h.waitPrepared(time.Minute, "dup")
		h.source(`COMMIT PREPARED 'dup'`)
		h.waitCaughtUp("pf", time.Minute)
		h.waitPrepared(time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		h.expect(tableRows("t", ""), "(1)", "(2)")
	})
}
