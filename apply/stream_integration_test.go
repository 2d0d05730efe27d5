package apply_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/walapply/walapply/internal/testutil"
	"github.com/walapply/walapply/testenv"
)

// TestStreamedBinary replays streamed values of many types with --binary:
// long runs of inserts go through COPY's binary format.
func TestStreamedBinary(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, streamSettings(version), nil)
		h.both(`CREATE TABLE il (id int PRIMARY KEY, v text)`,
			`CREATE TABLE ty (id int PRIMARY KEY, t text, n numeric, ts timestamptz, j jsonb, b bytea, a text[], p point, iv interval, u uuid)`)
		h.source(`CREATE PUBLICATION pub FOR TABLE il, ty`)
		h.createSlot("b")
		cfg, _ := h.streamConfig("b", "on", "pub")
		cfg.Binary = true
		stop := h.runApplier(cfg)
		streamValues(h, "b")
		if n, _ := strconv.Atoi(h.streamedTxns("b")); n < 1 {
			t.Errorf("the source streamed %d transactions, want 1", n)
		}
		if err := stop(); err != nil {
			t.Fatalf("applier: %v", err)
		}
	})
}

// TestStreamedTransactions replays streamed in-progress transactions onto a
// real target: interleaved ones whose order matters, nested savepoints with
// ROLLBACK TO and RELEASE, aborts, and a target with extra columns. With
// --streaming parallel on 16+ as well.
func TestStreamedTransactions(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		modes := []string{"on"}
		if version >= 16 {
			modes = append(modes, "parallel")
		}
		for _, mode := range modes {
			t.Run(mode, func(t *testing.T) {
				h := newHarness(t, version, streamSettings(version), nil)
				h.both(
					`CREATE TABLE il (id int PRIMARY KEY, v text)`,
					`CREATE TABLE sp (id int PRIMARY KEY, v text)`,
					`CREATE TABLE ab (id int PRIMARY KEY, v text)`,
					`CREATE TABLE ty (id int PRIMARY KEY, t text, n numeric, ts timestamptz, j jsonb, b bytea, a text[], p point, iv interval, u uuid)`,
				)
				h.source(`CREATE TABLE ex (id int PRIMARY KEY, v text)`)
				h.target(`CREATE TABLE ex (n int DEFAULT 42, id int PRIMARY KEY, added date DEFAULT '2000-01-01',
					v text, twice int GENERATED ALWAYS AS (id * 2) STORED)`)
				h.source(`CREATE PUBLICATION pub FOR TABLE il, sp, ab, ex, ty`)
				h.createSlot("s")
				cfg, logs := h.streamConfig("s", mode, "pub")
				stop := h.runApplier(cfg)

				streamInterleaved(h)
				streamSavepoints(h, logs)
				streamAborts(h, logs)
				streamExtraColumns(h)
				streamValues(h, "s")

				streamed, _ := strconv.Atoi(h.streamedTxns("s"))
				if streamed < 8 {
					t.Errorf("the source streamed %d transactions, want at least 8: the test did not exercise streaming", streamed)
				}
				if files := spillFiles(t, cfg.SpillDir); len(files) != 0 {
					t.Errorf("spill files left after every streamed transaction ended: %v", files)
				}
				if err := stop(); err != nil {
					t.Fatalf("applier: %v", err)
				}
			})
		}
	})
}

// rowsSQL inserts rows from..to into table with ~100-byte values: 1000 of
// them pass the source's 64kB logical_decoding_work_mem, so they stream.
func rowsSQL(table string, from, to int, tag string) string {
	return fmt.Sprintf(`INSERT INTO %s SELECT g, '%s' || repeat('x', 100) FROM generate_series(%d, %d) g`, table, tag, from, to)
}

// streamInterleaved: two transactions stream at once; the second deletes
// rows the first inserted after the first committed, so applying them in
// any order but commit order loses the deletes.
func streamInterleaved(h *harness) {
	h.t.Helper()
	c1, c2 := h.conn(true), h.conn(true)
	h.run(c1, "BEGIN", rowsSQL("il", 1, 2000, "t1"))
	h.run(c2, "BEGIN", rowsSQL("il", 100001, 102000, "t2"))
	h.run(c1, rowsSQL("il", 2001, 4000, "t1"))
	h.run(c2, `UPDATE il SET v = 't2 updated' WHERE id > 100000 AND id % 2 = 0`)
	h.run(c1, "COMMIT")
	h.run(c2, `DELETE FROM il WHERE id <= 3000`, `INSERT INTO il VALUES (1, 'reinserted by t2')`, rowsSQL("il", 102001, 103000, "t2"), "COMMIT")
	h.waitCaughtUp("s", time.Minute)
	if n := h.compare(tableRows("il", "")); n != 1+1000+3000 {
		h.t.Errorf("il has %d rows, want %d", n, 1+1000+3000)
	}
	h.expect(`SELECT v FROM il WHERE id = 1`, "reinserted by t2")
}

// streamSavepoints: nested savepoints, ROLLBACK TO at several depths,
// RELEASE, and changes after a rollback; every step is large enough to be
// streamed before it is rolled back, so the source sends Stream Aborts for
// subtransactions.
func streamSavepoints(h *harness, logs *testutil.LogBuffer) {
	h.t.Helper()
	before := logs.Count("subtransaction of a streamed transaction aborted")
	c := h.conn(true)
	h.run(c, "BEGIN",
		rowsSQL("sp", 1, 1000, "top"),                 // kept
		"SAVEPOINT a", rowsSQL("sp", 1001, 2000, "a"), // kept (a is released)
		"SAVEPOINT b", rowsSQL("sp", 2001, 3000, "b"),
		"ROLLBACK TO b",                                            // drops 2001-3000
		rowsSQL("sp", 3001, 4000, "b2"),                            // kept
		"SAVEPOINT c", rowsSQL("sp", 4001, 5000, "c"), "RELEASE c", // kept
		"SAVEPOINT d", rowsSQL("sp", 5001, 6000, "d"),
		"SAVEPOINT e", rowsSQL("sp", 6001, 7000, "e"),
		"ROLLBACK TO d", // two levels: drops 5001-7000
		`UPDATE sp SET v = 'updated in d' WHERE id <= 1000`, // kept
		"RELEASE a",
		"SAVEPOINT f", rowsSQL("sp", 7001, 8000, "f"), `DELETE FROM sp WHERE id BETWEEN 1001 AND 1500`,
		"ROLLBACK TO f",                                                             // drops the insert and the delete
		"SAVEPOINT g", `DELETE FROM sp WHERE id BETWEEN 1501 AND 2000`, "RELEASE g", // kept
		"SAVEPOINT h", rowsSQL("sp", 8001, 9000, "h"),
		"SAVEPOINT i", rowsSQL("sp", 9001, 10000, "i"), "RELEASE i",
		"ROLLBACK TO h", // drops h and the released i
		rowsSQL("sp", 10001, 11000, "after"),
		"COMMIT")
	h.waitCaughtUp("s", time.Minute)
	if n := h.compare(tableRows("sp", "")); n != 4500 {
		h.t.Errorf("sp has %d rows, want 4500", n)
	}
	h.expect(`SELECT count(*)::text FROM sp WHERE id BETWEEN 2001 AND 3000 OR id BETWEEN 5001 AND 10000 OR id BETWEEN 1501 AND 2000`, "0")
	h.expect(`SELECT count(*)::text FROM sp WHERE v = 'updated in d'`, "1000")
	if n := logs.Count("subtransaction of a streamed transaction aborted") - before; n < 4 {
		h.t.Errorf("%d subtransaction aborts of streamed transactions, want at least 4: the rollbacks were not streamed", n)
	}
}

// streamAborts: a streamed transaction that aborts while another commits,
// and one that aborts after one of its savepoints was rolled back.
func streamAborts(h *harness, logs *testutil.LogBuffer) {
	h.t.Helper()
	before := topAborts(logs)
	c1, c2 := h.conn(true), h.conn(true)
	h.run(c1, "BEGIN", rowsSQL("ab", 1, 2000, "aborted"))
	h.run(c2, "BEGIN", rowsSQL("ab", 10001, 12000, "kept"))
	h.run(c1, `UPDATE ab SET v = 'no'`, "ROLLBACK")
	h.run(c2, "COMMIT")
	h.run(c1, "BEGIN", rowsSQL("ab", 20001, 21000, "aborted"), "SAVEPOINT s", rowsSQL("ab", 21001, 22000, "aborted"),
		"ROLLBACK TO s", rowsSQL("ab", 22001, 23000, "aborted"), "ROLLBACK")
	// An abort record does not flush the source's WAL, so the position
	// waitCaughtUp waits for may lie before it: wait for the aborts to
	// arrive, then for the rest.
	deadline := time.Now().Add(time.Minute)
	for topAborts(logs) < before+2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	h.waitCaughtUp("s", time.Minute)
	if n := h.compare(tableRows("ab", "")); n != 2000 {
		h.t.Errorf("ab has %d rows, want 2000", n)
	}
	if n := topAborts(logs) - before; n != 2 {
		h.t.Errorf("%d streamed transactions aborted, want 2", n)
	}
}

// topAborts counts the aborts of streamed transactions in the log, spilled
// (the file removed) or applied as they streamed (rolled back).
func topAborts(logs *testutil.LogBuffer) int {
	return logs.Count("streamed transaction aborted; its spill file is removed") +
		logs.Count("streamed transaction aborted; rolled back on its parallel connection")
}

// streamExtraColumns: the target table has other columns (defaults, a
// generated column) in another order; streamed inserts, updates and deletes
// leave them as the target's defaults make them.
func streamExtraColumns(h *harness) {
	h.t.Helper()
	c := h.conn(true)
	h.run(c, "BEGIN", rowsSQL("ex", 1, 3000, "ex"), `UPDATE ex SET v = 'updated' WHERE id % 3 = 0`,
		`DELETE FROM ex WHERE id % 5 = 0`, "COMMIT")
	h.waitCaughtUp("s", time.Minute)
	if n := h.compare(tableRows("ex", "id, v")); n != 2400 {
		h.t.Errorf("ex has %d rows, want 2400", n)
	}
	h.expect(`SELECT count(*)::text FROM ex WHERE n = 42 AND added = '2000-01-01' AND twice = id * 2`, "2400")
}

// streamValues: values of many types, and text that COPY's text format must
// escape (tabs, newlines, backslashes, a literal \N), in long runs of
// inserts (replayed with COPY) and single ones (replayed with INSERT).
func streamValues(h *harness, slot string) {
	h.t.Helper()
	c := h.conn(true)
	values := `SELECT g,
		CASE g %% 7 WHEN 0 THEN E'tab\there' WHEN 1 THEN E'line\nbreak\r\n' WHEN 2 THEN E'back\\slash\\' WHEN 3 THEN '\N'
			WHEN 4 THEN NULL WHEN 5 THEN '' ELSE 'été ✓ ' || repeat('y', 80) END,
		g * 1.5, timestamptz '2024-02-29 12:00:00+00' + g * interval '1 minute', jsonb_build_object('k', g, 's', E'q"\\'),
		decode(lpad(to_hex(g), 8, '0'), 'hex'), ARRAY['a', E'b\\c', NULL, 'd"e'], point(g, -g), g * interval '1 second',
		md5(g::text)::uuid
		FROM generate_series(%d, %d) g`
	h.run(c, "BEGIN",
		"INSERT INTO ty "+fmt.Sprintf(values, 1, 1500),
		"INSERT INTO il VALUES (900001, 'between')",
		"INSERT INTO ty "+fmt.Sprintf(values, 1501, 1530), // a run too short for COPY
		`UPDATE ty SET t = E'updated\\\t' WHERE id % 10 = 0`,
		"INSERT INTO ty "+fmt.Sprintf(values, 2001, 3000),
		"COMMIT")
	h.waitCaughtUp(slot, time.Minute)
	if n := h.compare(tableRows("ty", "")); n != 2530 {
		h.t.Errorf("ty has %d rows, want 2530", n)
	}
	h.expect(`SELECT count(*)::text FROM ty WHERE t IS NULL OR t = '\N' OR t LIKE E'%\t%'`, "1173") // 3 of every 7, and the updated ones
}
