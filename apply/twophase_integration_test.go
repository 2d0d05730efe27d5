package apply_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/testenv"
	"github.com/walapply/walapply/twophase"
)

// TestTwoPhaseApply replays prepared transactions one scenario after
// another through one applier: prepare then commit, with an ordinary
// transaction in between; prepare then rollback; nested savepoints rolled
// back inside a prepared transaction; the empty GID; empty prepared
// transactions. The target holds each transaction prepared, invisible,
// until its outcome, and nothing stays prepared after it.
func TestTwoPhaseApply(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, nil)
		h.both(`CREATE TABLE t (id int PRIMARY KEY, v text)`)
		h.source(`CREATE TABLE unpub (id int)`, `CREATE PUBLICATION pub FOR TABLE t`)
		h.twoPhaseSlot("tp")
		cfg, logs := h.twoPhaseConfig("tp", "pub")
		stop := h.runApplier(cfg)
		rows := tableRows("t", "")

		// Prepare, an ordinary transaction while it is prepared, commit.
		g1 := gidOf(t, "tp", h.prepareOnSource("g1", `INSERT INTO t VALUES (1, 'a'), (2, 'b')`))
		h.waitCaughtUp("tp", time.Minute)
		h.waitPrepared(time.Minute, g1)
		h.expect(rows)
		before := h.originProgress("tp")
		h.source(`INSERT INTO t VALUES (10, 'between')`)
		h.waitCaughtUp("tp", time.Minute)
		h.expect(rows, "(10,between)")
		h.expectPreparedNow(g1)
		h.source(`COMMIT PREPARED 'g1'`)
		h.waitCaughtUp("tp", time.Minute)
		h.waitPrepared(time.Minute)
		h.expect(rows, "(1,a)", "(2,b)", "(10,between)")
		if after := h.originProgress("tp"); after == before {
			t.Errorf("the origin did not advance past COMMIT PREPARED (still %s)", after)
		}

		// Prepare, rollback.
		g2 := gidOf(t, "tp", h.prepareOnSource("g2", `INSERT INTO t VALUES (3, 'c')`, `UPDATE t SET v = 'changed' WHERE id = 1`, `DELETE FROM t WHERE id = 2`))
		h.waitCaughtUp("tp", time.Minute)
		h.waitPrepared(time.Minute, g2)
		h.source(`ROLLBACK PREPARED 'g2'`)
		h.waitCaughtUp("tp", time.Minute)
		h.waitPrepared(time.Minute)
		h.expect(rows, "(1,a)", "(2,b)", "(10,between)")

		// Nested savepoints, some rolled back, inside a prepared transaction.
		g3 := gidOf(t, "tp", h.prepareOnSource("g3",
			`INSERT INTO t VALUES (4, 'four')`,
			`SAVEPOINT a`, `INSERT INTO t VALUES (5, 'five')`,
			`SAVEPOINT b`, `INSERT INTO t VALUES (6, 'six')`, `UPDATE t SET v = 'x' WHERE id = 4`,
			`ROLLBACK TO SAVEPOINT b`, `INSERT INTO t VALUES (7, 'seven')`,
			`SAVEPOINT c`, `DELETE FROM t WHERE id = 2`, `SAVEPOINT d`, `UPDATE t SET v = 'y' WHERE id = 5`,
			`ROLLBACK TO SAVEPOINT c`, `RELEASE SAVEPOINT a`, `UPDATE t SET v = 'ten' WHERE id = 10`))
		h.waitCaughtUp("tp", time.Minute)
		h.waitPrepared(time.Minute, g3)
		h.source(`COMMIT PREPARED 'g3'`)
		h.waitCaughtUp("tp", time.Minute)
		h.waitPrepared(time.Minute)
		h.expect(rows, "(1,a)", "(2,b)", "(4,four)", "(5,five)", "(7,seven)", "(10,ten)")

		// The empty GID.
		g4 := gidOf(t, "tp", h.prepareOnSource("", `INSERT INTO t VALUES (8, 'empty gid')`))
		h.waitCaughtUp("tp", time.Minute)
		h.waitPrepared(time.Minute, g4)
		h.source(`COMMIT PREPARED ''`)
		h.waitCaughtUp("tp", time.Minute)
		h.waitPrepared(time.Minute)

		// Empty prepared transactions: changes only to an unpublished table
		// (sent as Begin Prepare and Prepare without changes: prepared empty
		// on the target until the outcome), no change at all, only a row
		// lock (not sent at PREPARE).
		g5 := gidOf(t, "tp", h.prepareOnSource("g5", `INSERT INTO unpub VALUES (1)`))
		h.waitCaughtUp("tp", time.Minute)
		h.waitPrepared(time.Minute, g5)
		h.source(`COMMIT PREPARED 'g5'`)
		h.prepareOnSource("g6", `SELECT pg_current_xact_id()`)
		h.source(`COMMIT PREPARED 'g6'`)
		h.prepareOnSource("g7", `INSERT INTO unpub VALUES (2)`)
		h.source(`ROLLBACK PREPARED 'g7'`)
		h.prepareOnSource("g8", `SELECT * FROM t WHERE id = 1 FOR UPDATE`)
		h.source(`ROLLBACK PREPARED 'g8'`)
		h.source(`INSERT INTO t VALUES (9, 'last')`)
		h.waitCaughtUp("tp", time.Minute)
		h.waitPrepared(time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		h.expect(rows, "(1,a)", "(2,b)", "(4,four)", "(5,five)", "(7,seven)", "(8,\"empty gid\")", "(9,last)", "(10,ten)")
		h.compare(rows)
		if n := logs.Count(`"level":"error"`); n > 0 {
			t.Errorf("%d error lines in the log", n)
		}
	})
}

// expectPreparedNow checks that exactly the given GIDs (sorted) are
// prepared on the target.
func (h *harness) expectPreparedNow(gids ...string) {
	h.t.Helper()
	got := h.preparedOn(h.pair.Target)
	if strings.Join(got, "\x00") != strings.Join(gids, "\x00") {
		h.t.Errorf("prepared on the target: %q, want %q", got, gids)
	}
}

// TestTwoPhaseSourceGIDs: with --gid-mode source the target prepares under
// the source's own GID, however it is spelled: empty, quotes, backslashes,
// non-ASCII, SQL. The applier creates the slot (--create-slot --two-phase),
// with two-phase decoding.
func TestTwoPhaseSourceGIDs(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, nil)
		h.both(`CREATE TABLE t (id int PRIMARY KEY, gid text)`)
		h.source(`CREATE PUBLICATION pub FOR TABLE t`)
		cfg, _ := h.twoPhaseConfig("src", "pub")
		cfg.GIDMode = twophase.GIDModeSource
		stop := h.runApplier(cfg)
		h.waitCaughtUp("src", time.Minute) // the slot exists
		if tp := h.scalar(true, "SELECT two_phase::text FROM pg_replication_slots WHERE slot_name = 'src'"); tp != "true" {
			t.Fatalf("the slot created with --two-phase has two_phase = %s", tp)
		}
		gids := []string{"", `it's`, `back\slash`, `\'`, `'\`, "日本語 ü 🐘", `'; DROP TABLE t; --`, "new\nline"}
		var want []string
		for i, gid := range gids {
			h.prepareOnSource(gid, "INSERT INTO t VALUES ("+string(rune('0'+i))+", "+twophase.QuoteGID(gid)+")")
			h.waitCaughtUp("src", time.Minute)
			h.waitPrepared(time.Minute, gid)
			if i%2 == 0 {
				h.source("COMMIT PREPARED " + twophase.QuoteGID(gid))
				want = append(want, gid)
			} else {
				h.source("ROLLBACK PREPARED " + twophase.QuoteGID(gid))
			}
			h.waitCaughtUp("src", time.Minute)
			h.waitPrepared(time.Minute)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		got := h.rows(h.pair.Target, "SELECT gid FROM t")
		if strings.Join(got, "\x00") != strings.Join(slices.Sorted(slices.Values(want)), "\x00") {
			t.Errorf("committed GIDs on the target: %q, want %q", got, want)
		}
		h.compare(tableRows("t", ""))
	})
}

// TestTwoPhaseTwoSources: two sources prepare under the same GID, and two
// appliers replicate them into one target; the default GIDs keep them
// apart, and each outcome finishes its own.
func TestTwoPhaseTwoSources(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, nil)
		other := testenv.NewCluster(t, testenv.Options{Version: version})
		h2 := &harness{t: t, pair: &testenv.Pair{Source: other, Target: h.pair.Target}, ctx: h.ctx}
		h.target(`CREATE TABLE t (id int PRIMARY KEY, src text)`)
		for _, x := range []*harness{h, h2} {
			x.source(`CREATE TABLE t (id int PRIMARY KEY, src text)`, `CREATE PUBLICATION pub FOR TABLE t`)
		}
		h.twoPhaseSlot("alpha")
		h2.twoPhaseSlot("beta")
		cfgA, _ := h.twoPhaseConfig("alpha", "pub")
		cfgB, _ := h2.twoPhaseConfig("beta", "pub")
		stopA, stopB := h.runApplier(cfgA), h2.runApplier(cfgB)

		ga := gidOf(t, "alpha", h.prepareOnSource("same", `INSERT INTO t VALUES (1, 'alpha'), (2, 'alpha')`))
		gb := gidOf(t, "beta", h2.prepareOnSource("same", `INSERT INTO t VALUES (3, 'beta')`))
		h.waitCaughtUp("alpha", time.Minute)
		h2.waitCaughtUp("beta", time.Minute)
		h.waitPrepared(time.Minute, ga, gb)
		h.source(`COMMIT PREPARED 'same'`)
		h2.source(`ROLLBACK PREPARED 'same'`)
		h.waitCaughtUp("alpha", time.Minute)
		h2.waitCaughtUp("beta", time.Minute)
		h.waitPrepared(time.Minute)
		for _, stop := range []func() error{stopA, stopB} {
			if err := stop(); err != nil {
				t.Fatal(err)
			}
		}
		h.expect(tableRows("t", ""), "(1,alpha)", "(2,alpha)")
	})
}

// TestTwoPhaseNeedsPreparedTransactions: a target that cannot prepare
// transactions stops the applier at start with an error naming the setting.
func TestTwoPhaseNeedsPreparedTransactions(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, map[string]string{"max_prepared_transactions": "0"})
		h.both(`CREATE TABLE t (id int PRIMARY KEY)`)
		h.source(`CREATE PUBLICATION pub FOR TABLE t`)
		cfg, _ := h.twoPhaseConfig("nomax", "pub")
		err := runUntilError(t, cfg)
		if !errors.Is(err, twophase.ErrNoPreparedTransactions) || !strings.Contains(err.Error(), "max_prepared_transactions") || apply.IsTransient(err) {
			t.Fatalf("want a permanent error naming max_prepared_transactions, got %v", err)
		}
		t.Logf("refused: %v", err)
	})
}

// TestTwoPhaseEnableOnExistingSlot: --two-phase on a slot created without
// it turns two-phase decoding on. A transaction prepared before that is
// sent whole at its COMMIT PREPARED, with a prepare LSN behind what the
// applier has applied since, and must be applied, not taken for a
// duplicate; one rolled back is reported by the source although the target
// never saw it, and must not fail. Transactions prepared afterwards are
// replicated at PREPARE.
func TestTwoPhaseEnableOnExistingSlot(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, nil)
		h.both(`CREATE TABLE t (id int PRIMARY KEY)`)
		h.source(`CREATE PUBLICATION pub FOR TABLE t`)
		h.createSlot("late")
		plain := h.config("late", "pub")
		stop := h.runApplier(plain)
		h.source(`INSERT INTO t VALUES (1)`)
		h.waitCaughtUp("late", time.Minute)
		h.prepareOnSource("x", `INSERT INTO t VALUES (2)`)
		h.prepareOnSource("y", `INSERT INTO t VALUES (3)`)
		h.source(`INSERT INTO t VALUES (4)`)
		h.waitCaughtUp("late", time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		h.expect(tableRows("t", ""), "(1)", "(4)")
		if tp := h.scalar(true, "SELECT two_phase::text FROM pg_replication_slots WHERE slot_name = 'late'"); tp != "false" {
			t.Fatalf("slot two_phase = %s before --two-phase", tp)
		}

		cfg, logs := h.twoPhaseConfig("late", "pub")
		stop = h.runApplier(cfg)
		h.waitLog(logs, time.Minute, "enabling two-phase decoding")
		h.source(`INSERT INTO t VALUES (5)`)
		h.waitCaughtUp("late", time.Minute)
		if tp := h.scalar(true, "SELECT two_phase::text FROM pg_replication_slots WHERE slot_name = 'late'"); tp != "true" {
			t.Errorf("slot two_phase = %s after starting with --two-phase", tp)
		}
		h.source(`COMMIT PREPARED 'x'`, `ROLLBACK PREPARED 'y'`)
		gz := gidOf(t, "late", h.prepareOnSource("z", `INSERT INTO t VALUES (6)`))
		h.waitCaughtUp("late", time.Minute)
		h.waitPrepared(time.Minute, gz)
		h.source(`COMMIT PREPARED 'z'`)
		h.waitCaughtUp("late", time.Minute)
		h.waitPrepared(time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		h.expect(tableRows("t", ""), "(1)", "(2)", "(4)", "(5)", "(6)")
		if logs.Count("applying a transaction prepared before two-phase decoding began") != 1 {
			t.Error("the commit of the transaction prepared before two-phase was enabled was not recognised as such")
		}
		if logs.Count("ROLLBACK PREPARED", "no such prepared transaction") != 1 {
			t.Error("the rollback of a transaction the target never saw was not reported")
		}
	})
}

// TestTwoPhaseLeftover: a prepared transaction of the applier on the target
// that the source does not have is reported once the stream has caught up,
// and left prepared.
func TestTwoPhaseLeftover(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, nil)
		h.both(`CREATE TABLE t (id int PRIMARY KEY)`)
		h.source(`CREATE PUBLICATION pub FOR TABLE t`)
		h.twoPhaseSlot("lo")
		waiting := gidOf(t, "lo", h.prepareOnSource("w", `INSERT INTO t VALUES (1)`))
		cfg, logs := h.twoPhaseConfig("lo", "pub")
		stop := h.runApplier(cfg)
		h.waitCaughtUp("lo", time.Minute)
		h.waitPrepared(time.Minute, waiting)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		orphan := gidOf(t, "lo", 4000000000)
		h.target(`BEGIN`, `INSERT INTO t VALUES (99)`, `PREPARE TRANSACTION '`+orphan+`'`)
		stop = h.runApplier(cfg)
		h.waitLog(logs, time.Minute, "waiting for its outcome", waiting)
		h.source(`INSERT INTO t VALUES (2)`)
		h.waitCaughtUp("lo", time.Minute)
		line := h.waitLog(logs, time.Minute, "leftover prepared transaction", orphan)
		t.Logf("reported: %s", line)
		if logs.Count("leftover prepared transaction", waiting) != 0 {
			t.Error("a transaction still prepared on the source was reported as a leftover")
		}
		h.source(`COMMIT PREPARED 'w'`)
		h.waitCaughtUp("lo", time.Minute)
		h.waitPrepared(time.Minute, orphan)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		h.target(`ROLLBACK PREPARED '` + orphan + `'`)
		h.expect(tableRows("t", ""), "(1)", "(2)")
	})
}
