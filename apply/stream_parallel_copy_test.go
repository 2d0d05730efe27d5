package apply_test

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/testenv"
)

// TestParallelCopyRuns: streamed transactions applied as they stream whose
// long runs of inserts go by COPY (internal/parallel, copyRun), each followed inside the
// same transaction by changes that only apply in source order: updates and
// deletes of rows the run inserted, a run re-inserting deleted keys, runs
// into two tables in turn, a run rolled back to a savepoint, a table COPY
// may not take (row-level security on the target), values COPY must
// escape or send as NULL; stream blocks of a few MB, so that a run spans
// several COPYs. Once in text, then once more with Binary.
func TestParallelCopyRuns(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := parallelHarness(t, version, map[string]string{"logical_decoding_work_mem": "4MB"})
		h.both(`CREATE TABLE c1 (id int PRIMARY KEY, v text, n int, b bytea)`,
			`CREATE TABLE c2 (id int PRIMARY KEY, v text)`, `CREATE TABLE c3 (id int PRIMARY KEY, v text)`)
		h.target(`ALTER TABLE c3 ENABLE ROW LEVEL SECURITY`)
		h.source(`CREATE PUBLICATION pub FOR TABLE c1, c2, c3`)
		h.createSlot("s")
		cfg, logs := h.streamConfig("s", "parallel", "pub")
		// run is one streamed transaction of runs of inserts, each followed
		// by changes of their rows; base offsets its keys.
		run := func(base int) {
			k := func(n int) string { return strconv.Itoa(base + n) }
			rows := func(table string, from, to int) string {
				return `INSERT INTO ` + table + ` SELECT g, CASE WHEN g % 7 = 0 THEN E'tab\there\nline\\back\rcr' ELSE repeat(md5(g::text), 18) END,
					CASE WHEN g % 2 = 0 THEN g END, decode(md5(g::text), 'hex') FROM generate_series(` + k(from) + `, ` + k(to) + `) g`
			}
			c := h.conn(true)
			h.run(c, "BEGIN",
				rows("c1", 1, 8000),
				`UPDATE c1 SET v = 'updated', n = -id WHERE id BETWEEN `+k(1)+` AND `+k(8000)+` AND id % 3 = 0`,
				`DELETE FROM c1 WHERE id BETWEEN `+k(1)+` AND `+k(8000)+` AND id % 5 = 0`,
				`INSERT INTO c1 SELECT g, 'again', NULL, '' FROM generate_series(`+k(5)+`, `+k(2000)+`, 5) g`,
				`INSERT INTO c2 SELECT g, 'c2' FROM generate_series(`+k(1)+`, `+k(500)+`) g`,
				rows("c1", 8001, 9000),
				`INSERT INTO c2 SELECT g, 'c2 again' FROM generate_series(`+k(501)+`, `+k(1000)+`) g`,
				`UPDATE c2 SET v = 'c2 updated' WHERE id BETWEEN `+k(1)+` AND `+k(1000)+` AND id % 2 = 0`,
				"SAVEPOINT a", rows("c1", 9001, 12000), "ROLLBACK TO a",
				"SAVEPOINT b", rows("c1", 12001, 13000), "RELEASE b",
				`DELETE FROM c1 WHERE id BETWEEN `+k(12001)+` AND `+k(12100),
				`INSERT INTO c3 SELECT g, 'rls' FROM generate_series(`+k(1)+`, `+k(500)+`) g`,
				`UPDATE c3 SET v = 'rls updated' WHERE id BETWEEN `+k(1)+` AND `+k(100),
				"COMMIT")
			h.waitCaughtUp("s", time.Minute)
			for _, table := range []string{"c1", "c2", "c3"} {
				if n := h.compare(tableRows(table, "")); n == 0 {
					t.Errorf("%s: no rows on the source; the comparison proves nothing", table)
				}
			}
		}
		stop := h.runApplier(cfg)
		run(0)
		if err := stop(); err != nil {
			t.Fatalf("applier: %v", err)
		}
		cfg.Binary = true
		stop = h.runApplier(cfg)
		run(100000)
		if err := stop(); err != nil {
			t.Fatalf("applier: %v", err)
		}
		if n := parallelApplied(logs); n != 2 {
			t.Errorf("%d streamed transactions applied as they streamed, want 2", n)
		}
		if n := logs.Count("replayed a streamed transaction"); n != 0 {
			t.Errorf("%d streamed transactions replayed from spill files, want 0", n)
		}
	})
}

// TestParallelCopyRunsSkip: with insert_exists=skip, a long run of inserts
// applied as it streams keeps INSERT ... ON CONFLICT instead of COPY, so a
// key the target already has is skipped and the rest applied, without a
// fallback to the spill path.
func TestParallelCopyRunsSkip(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := parallelHarness(t, version, map[string]string{"logical_decoding_work_mem": "64kB"})
		h.both(`CREATE TABLE u (id int PRIMARY KEY, v text)`)
		h.target(`INSERT INTO u VALUES (1500, 'target only')`)
		h.source(`CREATE PUBLICATION pub FOR TABLE u`)
		h.createSlot("s")
		cfg, logs := h.streamConfig("s", "parallel", "pub")
		cfg.Conflicts = apply.ConflictPolicies{apply.ConflictInsertExists: apply.PolicySkip}
		stop := h.runApplier(cfg)
		h.source(rowsSQL("u", 1, 3000, "x"))
		h.waitCaughtUp("s", time.Minute)
		if err := stop(); err != nil {
			t.Fatalf("applier: %v", err)
		}
		h.expect(`SELECT count(*)::text FROM u`, "3000")
		h.expect(`SELECT v FROM u WHERE id = 1500`, "target only")
		if n := parallelApplied(logs); n != 1 {
			t.Errorf("%d streamed transactions applied as they streamed, want 1", n)
		}
	})
}

// TestParallelCopyRunsAcrossBlocks: a bulk insert streamed in many small
// blocks (logical_decoding_work_mem = 64kB, a few hundred rows each) goes
// as a few COPYs of a worker's COPY size (1 MB): the end of a stream block does
// not cut the run short (which sent each block's first rows through the
// compactor and the rest as a COPY of a block's worth).
func TestParallelCopyRunsAcrossBlocks(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := parallelHarness(t, version, map[string]string{"logical_decoding_work_mem": "64kB"})
		h.both(`CREATE TABLE b (id int PRIMARY KEY, v text)`)
		h.source(`CREATE PUBLICATION pub FOR TABLE b`)
		h.createSlot("s")
		cfg, logs := h.streamConfig("s", "parallel", "pub")
		stop := h.runApplier(cfg)
		const rows = 20000
		h.source(`INSERT INTO b SELECT g, repeat(md5(g::text), 3) FROM generate_series(1, ` + strconv.Itoa(rows) + `) g`)
		h.waitCaughtUp("s", time.Minute)
		if err := stop(); err != nil {
			t.Fatalf("applier: %v", err)
		}
		h.expect(`SELECT count(*)::text FROM b`, strconv.Itoa(rows))
		if n := h.compare(tableRows("b", "")); n != rows {
			t.Errorf("%d rows compared, want %d", n, rows)
		}
		line, ok := logs.Line("applied a streamed transaction as it streamed")
		if !ok {
			t.Fatalf("the transaction was not applied as it streamed; log:\n%s", logs)
		}
		// 20000 rows of 100 bytes are 2 MB: two or three COPYs of
		// 1 MB (internal/parallel, copyBytes) when the run spans the blocks, one per
		// block when each block starts it anew.
		if n := logInt(t, line, "copies"); n > 4 {
			t.Errorf("%d COPYs for one run of %d inserts, want at most 4; log line: %s", n, rows, line)
		}
		if n := logInt(t, line, "inserts"); n != rows {
			t.Errorf("%d inserts, want %d", n, rows)
		}
	})
}

// logInt reads the integer field key of a JSON log line.
func logInt(t *testing.T, line, key string) int64 {
	t.Helper()
	var fields map[string]any
	if err := json.Unmarshal([]byte(line), &fields); err != nil {
		t.Fatalf("log line %q: %v", line, err)
	}
	n, ok := fields[key].(float64)
	if !ok {
		t.Fatalf("log line %q has no number %q", line, key)
	}
	return int64(n)
}
