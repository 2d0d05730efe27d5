package apply_test

import (
	"testing"
	"time"

	"github.com/walapply/walapply/testenv"
)

// TestStreamedEmptyTransaction: a large source transaction that changes
// only unpublished tables is still streamed by pgoutput (Stream Start …
// Stream Commit, no change inside), and its replay commits a target
// transaction that writes nothing. The slot must confirm past it anyway:
// without a commit record the origin does not advance, and an applier that
// counted it as applied waited for it to become durable until some later
// transaction wrote (the start-up cuts' single migration transaction on a
// cascade's middle node was such a transaction).
func TestStreamedEmptyTransaction(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, streamSettings(version), nil)
		h.both(`CREATE TABLE t (id int PRIMARY KEY)`)
		h.source(`CREATE TABLE unpublished (id int PRIMARY KEY, pad text)`, `CREATE PUBLICATION pub FOR TABLE t`)
		cfg, logs := h.streamConfig("empty_slot", "on", "pub")
		h.runApplier(cfg)
		if err := h.pair.Source.WaitSlotActive(h.ctx, "empty_slot", true, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		h.source(`INSERT INTO unpublished SELECT g, repeat('x', 100) FROM generate_series(1, 3000) g`)
		h.waitLog(logs, 30*time.Second, "replayed a streamed transaction")
		h.waitCaughtUp("empty_slot", 30*time.Second)
	})
}

// TestEmptyTargetTransaction: a source transaction whose changes leave
// nothing to write on the target (an insert and a delete of the same row,
// which compaction nets to nothing) commits a target transaction without
// a write of its own. The origin advance gives it an xid
// (state.XactSetupSQL): without one PostgreSQL writes no commit record, the
// origin stays behind, and the slot never confirms past the transaction
// while nothing else is written (TestDDLNewTablesAndRollback's last
// transactions stalled so on PostgreSQL 18).
func TestEmptyTargetTransaction(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, nil)
		h.both(`CREATE TABLE t (id int PRIMARY KEY)`)
		h.source(`CREATE PUBLICATION pub FOR TABLE t`)
		h.runApplier(h.config("netnothing", "pub"))
		if err := h.pair.Source.WaitSlotActive(h.ctx, "netnothing", true, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		h.source(`INSERT INTO t VALUES (0)`)
		h.waitCaughtUp("netnothing", 30*time.Second)
		h.source(`BEGIN; INSERT INTO t VALUES (1); DELETE FROM t WHERE id = 1; COMMIT`)
		h.waitCaughtUp("netnothing", 30*time.Second)
		h.expect(`SELECT id FROM t ORDER BY id`, "0")
	})
}
