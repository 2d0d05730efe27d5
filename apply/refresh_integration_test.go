package apply_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/testenv"
)

// refreshSchema creates the tables of the refresh tests: t_old published
// from the start, t_first, t_new and t_late published later, 100 rows
// each on the source; the target has them all, empty.
func (h *harness) refreshSchema() {
	h.t.Helper()
	for _, t := range []string{"t_old", "t_new", "t_late", "t_first"} {
		h.both(fmt.Sprintf(`CREATE TABLE %s (id int PRIMARY KEY, v int NOT NULL, note text)`, t))
		h.source(fmt.Sprintf(`INSERT INTO %s SELECT g, g, 'before' FROM generate_series(1, 100) g`, t))
	}
	h.source(`CREATE PUBLICATION p FOR TABLE t_old`)
}

// refreshStep writes to every table of refreshSchema in one transaction:
// updates of the first 100 rows (which only a copy brings), inserts and a
// delete, published or not.
func refreshStep(ctx context.Context, tx pgx.Tx, i int) error {
	for _, t := range []string{"t_old", "t_new", "t_late"} {
		for _, s := range []struct {
			sql  string
			args []any
		}{
			{`UPDATE ` + t + ` SET v = v + 1, note = 'updated' WHERE id = $1`, []any{i%100 + 1}},
			{`INSERT INTO ` + t + ` VALUES ($1, $1, 'inserted')`, []any{1000 + i}},
			{`DELETE FROM ` + t + ` WHERE id = $1`, []any{1000 + i - 3}},
		} {
			if _, err := tx.Exec(ctx, s.sql, s.args...); err != nil {
				return fmt.Errorf("%s: %w", s.sql, err)
			}
		}
	}
	return nil
}

// TestRefreshAddTable: tables added to the publication of an applier made
// with --copy are copied in a snapshot of their own, also while the
// source writes to them and to the other tables: a table added while the
// applier streams (found at its first Relation message), and one added
// while it is stopped (found at the start). Every row arrives once, and
// updates of rows only the copy brought apply (no update_missing); a table
// added in the transaction that writes to it, with nothing after. A table
// removed from the publication keeps its rows and gets no later changes.
func TestRefreshAddTable(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, map[string]string{"logical_decoding_work_mem": "64kB"}, nil)
		h.refreshSchema()
		cfg, logs := h.streamConfig("rslot", "", "p")
		cfg.CreateSlot, cfg.Copy = false, true
		stop := h.runApplier(cfg)
		h.waitLog(logs, time.Minute, `"message":"replicating"`) // past the start's refresh

		// Added and written in one transaction, and then nothing: that
		// transaction, whose only change the copy holds, must still move
		// the origin (a commit that writes nothing does not).
		h.source(`ALTER PUBLICATION p ADD TABLE t_first; UPDATE t_first SET note = 'with the add' WHERE id = 1`)
		h.waitCaughtUp("rslot", time.Minute)
		h.compare(tableRows("t_first", ""))

		w := h.startCopyWriter(refreshStep)
		if err := w.waitMore(20); err != nil {
			t.Fatal(err)
		}

		// Added while the applier streams, under writes.
		h.source(`ALTER PUBLICATION p ADD TABLE t_new`)
		if err := w.waitMore(40); err != nil {
			t.Fatal(err)
		}
		h.waitLog(logs, time.Minute, "caught up with the stream", "t_new")
		h.waitLog(logs, time.Second, "copying it while the other tables are applied", "t_new")
		if err := w.waitMore(20); err != nil {
			t.Fatal(err)
		}

		// Added while the applier is stopped, under writes.
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		h.source(`ALTER PUBLICATION p ADD TABLE t_late`)
		if err := w.waitMore(30); err != nil {
			t.Fatal(err)
		}
		stop = h.runApplier(cfg)
		h.waitLog(logs, time.Minute, "copied table", "t_late")
		if err := w.waitMore(20); err != nil {
			t.Fatal(err)
		}

		if err := w.finish(); err != nil {
			t.Fatal(err)
		}
		h.waitCaughtUp("rslot", time.Minute)
		n := 0
		for _, tb := range []string{"t_old", "t_new", "t_late"} {
			n += h.compare(tableRows(tb, ""))
		}

		// Removed: its rows stay, later changes do not come; the next
		// start records it as no longer published.
		h.source(`ALTER PUBLICATION p DROP TABLE t_old`, `UPDATE t_old SET note = 'after the drop'`, `INSERT INTO t_new VALUES (-1, -1, 'after the drop')`)
		h.waitCaughtUp("rslot", time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		stop = h.runApplier(cfg)
		h.source(`UPDATE t_old SET note = 'after the restart'`, `INSERT INTO t_new VALUES (-2, -2, 'after the restart')`)
		h.waitCaughtUp("rslot", time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		h.compare(tableRows("t_new", ""))
		h.expect(`SELECT count(*)::text FROM t_old WHERE note LIKE 'after the %'`, "0")
		if got := h.scalar(false, `SELECT count(*)::text FROM t_old`); got == "0" {
			t.Errorf("t_old's rows on the target are gone")
		}
		if c := logs.Count("update_missing") + logs.Count("delete_missing"); c != 0 {
			t.Errorf("%d changes found no row on the target, want 0", c)
		}
		h.expect(`SELECT s.table_name || ' ' || s.status || ' ' || s.published || ' ' || (s.copy_lsn > c.consistent_point)
			FROM walapply.copy_state s JOIN walapply.copies c USING (applier)`,
			"t_old done false false", "t_first done true true", "t_new done true true", "t_late done true true")
		if got := h.rows(h.pair.Source, `SELECT slot_name::text FROM pg_replication_slots`); len(got) != 1 || got[0] != "rslot" {
			t.Errorf("slots on the source: %q, want only rslot", got)
		}
		t.Logf("PostgreSQL %d: two tables added under %d concurrent transactions, %d rows compared, all equal", version, w.commits.Load(), n)
	})
}

// TestRefreshCopyKilled kills walapply with SIGKILL in the middle of
// copying a table added to the publication, while the source writes to it
// and to the other table, and starts it again: the table is copied again
// in a newer snapshot, and every change arrives exactly once.
func TestRefreshCopyKilled(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, nil)
		h.refreshSchema()
		h.source(`INSERT INTO t_new SELECT g, g, 'more' FROM generate_series(100001, 105000) g`)
		// The copy of t_new stops in the middle for as long as the test
		// holds advisory lock 4243 (as in TestCopyResumeAfterKill).
		h.target(
			`CREATE FUNCTION hold_copy() RETURNS trigger LANGUAGE plpgsql AS $$
			 BEGIN
			   IF NEW.id BETWEEN 102000 AND 103000 THEN PERFORM pg_advisory_xact_lock_shared(4243); END IF;
			   RETURN NEW;
			 END $$`,
			`CREATE TRIGGER hold_copy BEFORE INSERT ON t_new FOR EACH ROW EXECUTE FUNCTION hold_copy()`,
			`ALTER TABLE t_new ENABLE ALWAYS TRIGGER hold_copy`,
		)
		lock := h.conn(false)
		h.run(lock, `SELECT pg_advisory_lock(4243)`)

		p := h.applierProcess("kslot", "p", "--copy")
		p.start()
		h.waitStreaming("kslot")
		w := h.startCopyWriter(refreshStep)
		if err := w.waitMore(20); err != nil {
			t.Fatal(err)
		}
		h.source(`ALTER PUBLICATION p ADD TABLE t_new`)
		h.waitTarget(t, p, `SELECT EXISTS (SELECT 1 FROM walapply.copy_state WHERE table_name = 't_new' AND status = 'pending')
			AND EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted)`)
		// The other tables keep streaming while t_new is copied.
		h.source(`INSERT INTO t_old VALUES (-5, -5, 'during the copy')`)
		h.waitTarget(t, p, `SELECT EXISTS (SELECT 1 FROM t_old WHERE id = -5)
			AND EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted)`)
		p.kill()
		if err := w.waitMore(40); err != nil {
			t.Fatal(err)
		}
		h.run(lock, `SELECT pg_advisory_unlock(4243)`)
		h.waitTarget(t, nil, `SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE application_name LIKE 'walapply % copy %')`)
		h.expect(`SELECT table_name || ' ' || status FROM walapply.copy_state`, "t_old done", "t_new pending")
		h.expect(`SELECT count(*)::text FROM t_new`, "0")

		p.start()
		h.waitTarget(t, p, `SELECT EXISTS (SELECT 1 FROM walapply.copy_state WHERE table_name = 't_new' AND status = 'done')`)
		if err := w.waitMore(30); err != nil {
			t.Fatal(err)
		}
		if err := w.finish(); err != nil {
			t.Fatal(err)
		}
		unwatch := h.watchProcess(p)
		h.waitCaughtUp("kslot", 2*time.Minute)
		unwatch()
		p.stop()
		n := h.compare(tableRows("t_old", "")) + h.compare(tableRows("t_new", ""))
		t.Logf("PostgreSQL %d: copy of an added table killed and redone; %d concurrent transactions, %d rows compared, all equal", version, w.commits.Load(), n)
	})
}

// TestRefreshCatchUpKilled kills walapply with SIGKILL while it catches
// up a table copied in the background (its rows committed, the changes
// set aside meanwhile being applied): the next start empties the table
// and copies it again, and every change arrives exactly once.
func TestRefreshCatchUpKilled(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, nil)
		h.refreshSchema()
		// On the target, the copy of t_new waits for advisory lock 4245
		// (so that changes after its snapshot are set aside meanwhile),
		// and updates of t_new, which only the catch-up makes, for 4244.
		h.target(
			`CREATE FUNCTION hold_copy() RETURNS trigger LANGUAGE plpgsql AS $$
			 BEGIN
			   IF TG_OP = 'INSERT' THEN PERFORM pg_advisory_xact_lock_shared(4245); ELSE PERFORM pg_advisory_xact_lock_shared(4244); END IF;
			   RETURN NEW;
			 END $$`,
			`CREATE TRIGGER hold_copy BEFORE INSERT OR UPDATE ON t_new FOR EACH ROW EXECUTE FUNCTION hold_copy()`,
			`ALTER TABLE t_new ENABLE ALWAYS TRIGGER hold_copy`,
		)
		lock := h.conn(false)
		h.run(lock, `SELECT pg_advisory_lock(4244)`, `SELECT pg_advisory_lock(4245)`)

		p := h.applierProcess("cslot", "p", "--copy")
		p.start()
		h.waitStreaming("cslot")
		w := h.startCopyWriter(refreshStep)
		if err := w.waitMore(20); err != nil {
			t.Fatal(err)
		}
		h.source(`ALTER PUBLICATION p ADD TABLE t_new`)
		h.waitTarget(t, p, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND objid = 4245 AND NOT granted)`)
		if err := w.waitMore(30); err != nil {
			t.Fatal(err)
		}
		h.run(lock, `SELECT pg_advisory_unlock(4245)`)
		h.waitTarget(t, p, `SELECT EXISTS (SELECT 1 FROM walapply.copy_state WHERE table_name = 't_new' AND status = 'copied')
			AND EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted)`)
		p.kill()
		// The catch-up's batch, COMMIT included, was sent: its backend
		// would commit it once it gets the lock. Ended, it rolls back.
		h.run(lock, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE 'walapply cslot %'`)
		if err := w.waitMore(40); err != nil {
			t.Fatal(err)
		}
		h.run(lock, `SELECT pg_advisory_unlock(4244)`)
		h.waitTarget(t, nil, `SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE application_name LIKE 'walapply cslot %' AND state <> 'idle')`)
		h.expect(`SELECT table_name || ' ' || status FROM walapply.copy_state`, "t_old done", "t_new copied")

		p.start()
		h.waitTarget(t, p, `SELECT EXISTS (SELECT 1 FROM walapply.copy_state WHERE table_name = 't_new' AND status = 'done')`)
		if err := w.waitMore(30); err != nil {
			t.Fatal(err)
		}
		if err := w.finish(); err != nil {
			t.Fatal(err)
		}
		unwatch := h.watchProcess(p)
		h.waitCaughtUp("cslot", 2*time.Minute)
		unwatch()
		p.stop()
		n := h.compare(tableRows("t_old", "")) + h.compare(tableRows("t_new", ""))
		t.Logf("PostgreSQL %d: catch-up of a table copied in the background killed, table copied again; %d concurrent transactions, %d rows compared, all equal", version, w.commits.Load(), n)
	})
}

// waitStreaming waits until an applier streams from slot: past its start,
// whose refresh copies the tables published by then. The slot's walsender
// must have taken START_REPLICATION (state catchup or streaming, not
// startup): with --copy the slot is active from its creation on, through
// the whole initial copy, and a table published then is copied by the
// start's refresh, before the stream, not in the background.
func (h *harness) waitStreaming(slot string) {
	h.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for h.scalar(true, `SELECT coalesce((SELECT (r.state IN ('catchup', 'streaming'))::text
		FROM pg_replication_slots s JOIN pg_stat_replication r ON r.pid = s.active_pid WHERE s.slot_name = $1), 'false')`, slot) != "true" {
		if time.Now().After(deadline) {
			h.t.Fatalf("slot %s not in use after a minute", slot)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRefreshStreamedFallback: a change to a table being copied in the
// background that comes in a streamed transaction ends the session, and
// the next one copies the table before streaming; every change arrives
// once.
func TestRefreshStreamedFallback(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, streamSettings(version), nil)
		h.refreshSchema()
		h.target(
			`CREATE FUNCTION hold_copy() RETURNS trigger LANGUAGE plpgsql AS $$
			 BEGIN PERFORM pg_advisory_xact_lock_shared(4246); RETURN NEW; END $$`,
			`CREATE TRIGGER hold_copy BEFORE INSERT ON t_new FOR EACH ROW EXECUTE FUNCTION hold_copy()`,
			`ALTER TABLE t_new ENABLE ALWAYS TRIGGER hold_copy`,
		)
		lock := h.conn(false)
		h.run(lock, `SELECT pg_advisory_lock(4246)`)
		cfg, logs := h.streamConfig("fslot", "on", "p")
		cfg.CreateSlot, cfg.Copy = false, true
		stop := h.runApplier(cfg)
		h.waitLog(logs, time.Minute, `"message":"replicating"`)
		h.source(`ALTER PUBLICATION p ADD TABLE t_new; UPDATE t_new SET note = 'small' WHERE id = 1`,
			`INSERT INTO t_new SELECT g, g, repeat('x', 100) FROM generate_series(5000, 7000) g`,
			`INSERT INTO t_old SELECT g, g, 'big' FROM generate_series(5000, 7000) g`)
		h.waitLog(logs, time.Minute, "starting a new session to copy them", "t_new")
		h.run(lock, `SELECT pg_advisory_unlock(4246)`)
		h.source(`UPDATE t_new SET note = 'after' WHERE id BETWEEN 5000 AND 5010`)
		h.waitCaughtUp("fslot", time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		n := h.compare(tableRows("t_old", "")) + h.compare(tableRows("t_new", ""))
		if c := logs.Count("update_missing") + logs.Count("delete_missing"); c != 0 {
			t.Errorf("%d changes found no row on the target, want 0", c)
		}
		t.Logf("PostgreSQL %d: %s streamed transactions; %d rows compared, all equal", version, h.streamedTxns("fslot"), n)
	})
}
