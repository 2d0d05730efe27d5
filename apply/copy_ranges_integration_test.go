package apply_test

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/testenv"
)

// rangesSchema creates two tables big enough to be copied in ranges with a
// split size of 64 kB: keyed, with an integer primary key (key ranges), and
// nokey, without one (ctid ranges); and small, copied whole.
func (h *harness) rangesSchema(rows int) {
	h.t.Helper()
	h.source(
		`CREATE TABLE keyed (id int PRIMARY KEY, v int NOT NULL, pad text)`,
		fmt.Sprintf(`INSERT INTO keyed SELECT g, g %% 100, md5(g::text) FROM generate_series(1, %d) g`, rows),
		`CREATE TABLE nokey (a int NOT NULL, b text)`,
		`ALTER TABLE nokey REPLICA IDENTITY FULL`,
		fmt.Sprintf(`INSERT INTO nokey SELECT g, md5(g::text) FROM generate_series(1, %d) g`, rows),
		`CREATE TABLE small (id int PRIMARY KEY, note text)`,
		`INSERT INTO small SELECT g, 'row ' || g FROM generate_series(1, 50) g`,
		`CREATE PUBLICATION pub FOR TABLE keyed, nokey, small`,
	)
	h.target(
		`CREATE TABLE keyed (id int PRIMARY KEY, v int NOT NULL, pad text)`,
		`CREATE TABLE nokey (a int NOT NULL, b text)`,
		`CREATE TABLE small (id int PRIMARY KEY, note text)`,
	)
}

// rangesStep is one transaction of the writer on rangesSchema's tables.
func rangesStep(rows int) func(ctx context.Context, tx pgx.Tx, i int) error {
	return func(ctx context.Context, tx pgx.Tx, i int) error {
		for _, s := range []struct {
			sql  string
			args []any
		}{
			{`INSERT INTO keyed VALUES ($1, $2, 'inserted')`, []any{2*rows + i, i}},
			{`UPDATE keyed SET v = v + 1, pad = 'updated' WHERE id = $1`, []any{i*7919%rows + 1}},
			{`DELETE FROM keyed WHERE id = $1`, []any{i*104729%rows + 1}},
			{`INSERT INTO nokey VALUES ($1, 'inserted')`, []any{100_000 + i}},
			{`UPDATE nokey SET b = 'updated' WHERE a = $1`, []any{i*7919%rows + 1}},
			{`DELETE FROM nokey WHERE a = $1`, []any{i*104729%rows + 1}},
			{`UPDATE small SET note = note || '+' WHERE id = $1`, []any{i%50 + 1}},
		} {
			if _, err := tx.Exec(ctx, s.sql, s.args...); err != nil {
				return fmt.Errorf("%s: %w", s.sql, err)
			}
		}
		return nil
	}
}

// compareRanges compares rangesSchema's tables row by row.
func (h *harness) compareRanges() int {
	h.t.Helper()
	n := 0
	for _, tbl := range []string{"keyed", "nokey", "small"} {
		c := h.compare(tableRows(tbl, ""))
		if c == 0 {
			h.t.Errorf("%s: no rows on the source; the comparison proves nothing", tbl)
		}
		n += c
	}
	return n
}

// TestCopyRanges copies two tables above the split size in ranges, with 3
// workers, in the slot's snapshot, while the source is written to: the
// ranges hold every row once, and the stream brings the rest.
func TestCopyRanges(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		const rows = 5000
		h := newHarness(t, version, nil, nil)
		h.rangesSchema(rows)
		w := h.startCopyWriter(rangesStep(rows))
		if err := w.waitMore(10); err != nil {
			t.Fatal(err)
		}
		var (
			once, doneOnce sync.Once
			pauseErr       error
			done           = make(chan apply.CopyProgress, 1)
		)
		cfg := h.config("rslot", "pub")
		cfg.CreateSlot, cfg.Copy = false, true
		cfg.CopyWorkers = 3
		cfg.CopySplitSize = 64 << 10
		cfg.OnCopyProgress = func(p apply.CopyProgress) {
			if p.RangesDone > 0 {
				// Writes the snapshot does not hold, while ranges are
				// still to be copied: the stream must bring them.
				once.Do(func() { pauseErr = w.waitMore(20) })
			}
			if p.Done {
				doneOnce.Do(func() { done <- p })
			}
		}
		stop := h.runApplier(cfg)
		var final apply.CopyProgress
		select {
		case final = <-done:
		case err := <-h.applierDone:
			t.Fatalf("the applier stopped during the copy: %v", err)
		case <-time.After(3 * time.Minute):
			t.Fatal("the copy did not finish within 3 minutes")
		}
		if pauseErr != nil {
			t.Fatal(pauseErr)
		}
		if err := w.waitMore(20); err != nil {
			t.Fatal(err)
		}
		if err := w.finish(); err != nil {
			t.Fatal(err)
		}
		h.waitCaughtUp("rslot", 2*time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		n := h.compareRanges()

		// The ranges really ran: keyed by its key, nokey by blocks, every
		// range done, their rows adding up to the table's; small whole.
		h.expect(`SELECT r.table_name || ' ' || r.split_by || ' ' || (count(*) >= 3)::text || ' ' || bool_and(r.status = 'done')::text
				|| ' ' || (sum(r.rows) = min(s.rows))::text || ' ' || (count(*) FILTER (WHERE r.lo IS NULL) = 1 AND count(*) FILTER (WHERE r.hi IS NULL) = 1)::text
			FROM walapply.copy_ranges r JOIN walapply.copy_state s USING (applier, schema_name, table_name)
			GROUP BY r.table_name, r.split_by`,
			"keyed id true true true true", "nokey ctid true true true true")
		h.expect(`SELECT table_name || ' ' || status FROM walapply.copy_state`, "keyed done", "nokey done", "small done")
		if final.RangesTotal < 6 || final.RangesDone != final.RangesTotal || final.TablesDone != 3 {
			t.Errorf("final progress %+v: want every range of both tables (at least 6) and 3 tables done", final)
		}
		t.Logf("PostgreSQL %d: %d ranges, %d concurrent transactions, %d rows compared, all equal", version, final.RangesTotal, w.commits.Load(), n)
	})
}

// TestCopyRangesResumeAfterKill kills walapply with SIGKILL while one range
// of keyed is held and the others are done, writes to the source, and
// starts it again: keyed is emptied and copied again in ranges in the new
// snapshot, nokey (done) stays, and nothing is there twice.
func TestCopyRangesResumeAfterKill(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		const rows = 5000
		h := newHarness(t, version, nil, nil)
		h.rangesSchema(rows)
		// One range of keyed stops at the row with id held for as long
		// as the test holds advisory lock 4343. The row is one that
		// rangesStep's writer never touches (it deletes and updates ids
		// 1..rows, inserts from 2*rows on): a row of the original ids
		// would not do, as the writer may have deleted all of those
		// before the copy's snapshot when walapply starts slowly (every
		// id of 2500-2600 is gone after its 4972nd transaction), and the
		// copy would then run through.
		const held = rows + rows/2
		h.source(fmt.Sprintf(`INSERT INTO keyed VALUES (%d, 0, 'held')`, held))
		h.target(
			fmt.Sprintf(`CREATE FUNCTION hold_copy() RETURNS trigger LANGUAGE plpgsql AS $$
			 BEGIN
			   IF NEW.id = %d THEN PERFORM pg_advisory_xact_lock_shared(4343); END IF;
			   RETURN NEW;
			 END $$`, held),
			`CREATE TRIGGER hold_copy BEFORE INSERT ON keyed FOR EACH ROW EXECUTE FUNCTION hold_copy()`,
			`ALTER TABLE keyed ENABLE ALWAYS TRIGGER hold_copy`,
		)
		lock, err := h.pair.Target.Connect(h.ctx, "postgres")
		if err != nil {
			t.Fatal(err)
		}
		defer lock.Close(h.ctx)
		if _, err := lock.Exec(h.ctx, `SELECT pg_advisory_lock(4343)`); err != nil {
			t.Fatal(err)
		}
		w := h.startCopyWriter(rangesStep(rows))
		if err := w.waitMore(10); err != nil {
			t.Fatal(err)
		}
		p := h.applierProcess("kslot", "pub", "--copy", "--copy-workers", "3", "--copy-split-size", "64kB")
		p.start()
		h.waitTarget(t, p, `SELECT (SELECT count(*) FROM walapply.copy_ranges WHERE table_name = 'keyed' AND status = 'pending') BETWEEN 1 AND 2
			AND (SELECT count(*) FROM walapply.copy_ranges WHERE table_name = 'keyed' AND status = 'done') >= 2
			AND (SELECT count(*) FROM walapply.copy_state WHERE table_name IN ('nokey', 'small') AND status = 'done') = 2
			AND EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted)`)
		p.kill()
		if err := w.waitMore(30); err != nil {
			t.Fatal(err)
		}
		if _, err := lock.Exec(h.ctx, `SELECT pg_advisory_unlock(4343)`); err != nil {
			t.Fatal(err)
		}
		h.waitTarget(t, nil, `SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE application_name LIKE 'walapply % copy %')`)
		h.expect(`SELECT table_name || ' ' || status FROM walapply.copy_state`, "keyed pending", "nokey done", "small done")
		// status shows how far keyed got.
		out, err := exec.Command(walapplyBinary(t), "status", "--target", h.pair.Target.ConnString("postgres"), "--name", "kslot").CombinedOutput()
		if err != nil {
			t.Fatalf("walapply status: %v\n%s", err, out)
		}
		if !regexp.MustCompile(`"keyed"  copy pending .*, [1-9][0-9]*/[0-9]+ ranges done`).Match(out) {
			t.Errorf("walapply status does not show keyed's ranges done:\n%s", out)
		}
		t.Logf("walapply status after the kill:\n%s", out)
		// Rows of the done ranges are on the target: the resumed copy
		// must not refuse keyed as not empty, nor copy them twice.
		h.expect(`SELECT (count(*) > 0)::text FROM keyed`, "true")

		p.start()
		h.waitCopyDone(3*time.Minute, p)
		if err := w.waitMore(20); err != nil {
			t.Fatal(err)
		}
		if err := w.finish(); err != nil {
			t.Fatal(err)
		}
		unwatch := h.watchProcess(p)
		h.waitCaughtUp("kslot", 3*time.Minute)
		unwatch()
		p.stop()
		n := h.compareRanges()
		h.expect(`SELECT s.table_name || ' ' || CASE WHEN s.copy_lsn = c.consistent_point THEN 'slot snapshot'
			WHEN s.copy_lsn > c.consistent_point THEN 'later snapshot' ELSE 'earlier?' END
			FROM walapply.copy_state s JOIN walapply.copies c USING (applier)`,
			"keyed later snapshot", "nokey slot snapshot", "small slot snapshot")
		h.expect(`SELECT table_name || ' ' || bool_and(status = 'done')::text FROM walapply.copy_ranges GROUP BY table_name`,
			"keyed true", "nokey true")
		t.Logf("PostgreSQL %d: copy killed with a range of keyed unfinished and resumed; %d concurrent transactions, %d rows compared, all equal", version, w.commits.Load(), n)
	})
}

// TestCopyRangesRefresh: a big table published while the applier streams
// is copied in ranges too, in its own snapshot, and caught up with the
// stream.
func TestCopyRangesRefresh(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		const rows = 5000
		h := newHarness(t, version, nil, nil)
		h.rangesSchema(rows)
		h.source(`ALTER PUBLICATION pub DROP TABLE keyed`)
		cfg, logs := h.streamConfig("fslot", "", "pub")
		cfg.CreateSlot, cfg.Copy = false, true
		cfg.CopyWorkers, cfg.CopySplitSize = 3, 64<<10
		stop := h.runApplier(cfg)
		h.waitLog(logs, time.Minute, `"message":"replicating"`)
		w := h.startCopyWriter(rangesStep(rows))
		if err := w.waitMore(10); err != nil {
			t.Fatal(err)
		}
		h.source(`ALTER PUBLICATION pub ADD TABLE keyed`)
		h.waitLog(logs, time.Minute, "caught up with the stream", "keyed")
		if err := w.waitMore(10); err != nil {
			t.Fatal(err)
		}
		if err := w.finish(); err != nil {
			t.Fatal(err)
		}
		h.waitCaughtUp("fslot", time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		n := h.compareRanges()
		if c := logs.Count(`"message":"copied range"`); c < 6 {
			t.Errorf("%d ranges copied, want those of nokey and keyed (at least 6)", c)
		}
		h.expect(`SELECT table_name || ' ' || bool_and(status = 'done')::text FROM walapply.copy_ranges GROUP BY table_name`,
			"keyed true", "nokey true")
		h.expect(`SELECT table_name || ' ' || status FROM walapply.copy_state`, "keyed done", "nokey done", "small done")
		t.Logf("PostgreSQL %d: keyed published later and copied in ranges; %d concurrent transactions, %d rows compared, all equal", version, w.commits.Load(), n)
	})
}
