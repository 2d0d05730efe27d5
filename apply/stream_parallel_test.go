package apply_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/internal/testutil"
	"github.com/walapply/walapply/testenv"
)

// parallelHarness is a harness for --streaming parallel, which needs a 16+
// source.
func parallelHarness(t *testing.T, version int, settings map[string]string) *harness {
	t.Helper()
	if version < 16 {
		t.Skipf("--streaming parallel needs PostgreSQL 16 or later, this is %d", version)
	}
	return newHarness(t, version, settings, nil)
}

// parallelApplied counts the streamed transactions the log says were
// applied as they streamed.
func parallelApplied(logs *testutil.LogBuffer) int {
	return logs.Count("applied a streamed transaction as it streamed")
}

// TestParallelStreamed runs issue 4's streamed scenarios with --streaming
// parallel (interleaved transactions whose order matters, nested
// savepoints with ROLLBACK TO and RELEASE, aborts, extra target columns,
// values of many types), then a schema change between the changes of a
// streamed transaction, and checks that they were applied as they streamed,
// with nothing spilled.
func TestParallelStreamed(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := parallelHarness(t, version, streamSettings(version))
		h.both(
			`CREATE TABLE il (id int PRIMARY KEY, v text)`,
			`CREATE TABLE sp (id int PRIMARY KEY, v text)`,
			`CREATE TABLE ab (id int PRIMARY KEY, v text)`,
			`CREATE TABLE ty (id int PRIMARY KEY, t text, n numeric, ts timestamptz, j jsonb, b bytea, a text[], p point, iv interval, u uuid)`,
		)
		h.source(`CREATE TABLE ex (id int PRIMARY KEY, v text)`, `CREATE TABLE dd (id int PRIMARY KEY, v text)`)
		h.target(`CREATE TABLE ex (n int DEFAULT 42, id int PRIMARY KEY, added date DEFAULT '2000-01-01',
			v text, twice int GENERATED ALWAYS AS (id * 2) STORED)`,
			`CREATE TABLE dd (id int PRIMARY KEY, v text, w int)`)
		h.source(`CREATE PUBLICATION pub FOR TABLE il, sp, ab, ex, ty, dd`)
		h.createSlot("s")
		cfg, logs := h.streamConfig("s", "parallel", "pub")
		stop := h.runApplier(cfg)

		streamInterleaved(h)
		streamSavepoints(h, logs)
		streamAborts(h, logs)
		streamExtraColumns(h)
		streamValues(h, "s")

		// A column added on the source between changes: the transaction's
		// later changes carry it.
		c := h.conn(true)
		h.run(c, "BEGIN", rowsSQL("dd", 1, 2000, "before"), `ALTER TABLE dd ADD COLUMN w int`,
			`INSERT INTO dd SELECT g, 'after', g FROM generate_series(2001, 4000) g`, `UPDATE dd SET w = -id WHERE id <= 10`, "COMMIT")
		h.waitCaughtUp("s", time.Minute)
		if n := h.compare(tableRows("dd", "")); n != 4000 {
			t.Errorf("dd has %d rows, want 4000", n)
		}

		if n := parallelApplied(logs); n < 7 {
			t.Errorf("%d streamed transactions applied as they streamed, want at least 7", n)
		}
		if n := logs.Count("replayed a streamed transaction"); n != 0 {
			t.Errorf("%d streamed transactions replayed from spill files, want 0", n)
		}
		if files := spillFiles(t, cfg.SpillDir); len(files) != 0 {
			t.Errorf("spill files left: %v", files)
		}
		if err := stop(); err != nil {
			t.Fatalf("applier: %v", err)
		}
	})
}

// TestParallelUniqueConflict: a streamed transaction inserts a key the
// target already has. Applied as it streams, it fails on its connection,
// falls back to the spill path, and stops there with the spill path's
// error, having applied nothing of it.
func TestParallelUniqueConflict(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := parallelHarness(t, version, map[string]string{"logical_decoding_work_mem": "64kB"})
		h.both(`CREATE TABLE u (id int PRIMARY KEY, v text)`)
		h.target(`INSERT INTO u VALUES (1500, 'target only')`)
		h.source(`CREATE PUBLICATION pub FOR TABLE u`)
		h.createSlot("s")
		cfg, logs := h.streamConfig("s", "parallel", "pub")
		stop := h.runApplier(cfg)
		h.source(rowsSQL("u", 1, 3000, "x"))
		var err error
		select {
		case err = <-h.applierDone:
		case <-time.After(2 * time.Minute):
			t.Fatal("the applier did not stop at the conflict")
		}
		_ = stop()
		if err == nil || !strings.Contains(err.Error(), "u") || !strings.Contains(err.Error(), "duplicate key") {
			t.Fatalf("applier stopped with %v, want the duplicate key on u", err)
		}
		if logs.Count("cannot be applied as it streams") < 1 {
			t.Error("no fallback to the spill path logged")
		}
		if logs.Count("replayed a streamed transaction") != 0 {
			t.Error("the transaction was replayed to its commit")
		}
		h.expect(`SELECT count(*)::text FROM u`, "1")
	})
}

// TestParallelTwoPhase: streamed prepared transactions applied as they
// stream are prepared on their connection, then committed or rolled back on
// the main one, also across a restart of the applier.
func TestParallelTwoPhase(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := parallelHarness(t, version, map[string]string{"logical_decoding_work_mem": "64kB"})
		h.both(`CREATE TABLE t (id int PRIMARY KEY, pad text)`)
		h.source(`CREATE PUBLICATION pub FOR TABLE t`)
		h.twoPhaseSlot("big")
		cfg, logs := h.streamConfig("big", "parallel", "pub")
		cfg.TwoPhase = true
		stop := h.runApplier(cfg)
		ins := func(from, to int) string {
			return `INSERT INTO t SELECT g, repeat('x', 100) FROM generate_series(` + strconv.Itoa(from) + `, ` + strconv.Itoa(to) + `) g`
		}
		g1 := gidOf(t, "big", h.prepareOnSource("s1", ins(1, 3000), `UPDATE t SET pad = 'u' WHERE id <= 10`))
		h.waitCaughtUp("big", time.Minute)
		h.waitPrepared(time.Minute, g1)
		h.expect("SELECT count(*)::text FROM t", "0")
		h.source(`COMMIT PREPARED 's1'`)
		h.waitCaughtUp("big", time.Minute)
		h.waitPrepared(time.Minute)

		g2 := gidOf(t, "big", h.prepareOnSource("s2", ins(3001, 5000), `SAVEPOINT a`, ins(5001, 6000),
			`ROLLBACK TO SAVEPOINT a`, `DELETE FROM t WHERE id <= 100`))
		h.waitCaughtUp("big", time.Minute)
		h.waitPrepared(time.Minute, g2)
		h.source(`ROLLBACK PREPARED 's2'`)

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
		h.compare(tableRows("t", "id, length(pad)"))
		if n := logs.Count("prepared on its parallel connection"); n != 3 {
			t.Errorf("%d transactions prepared on a parallel connection, want 3", n)
		}

		// walapply drop removes the parallel connections' origins too.
		h.expect(`SELECT count(*)::text FROM pg_replication_origin WHERE roname LIKE 'walapply_par%'`, "1")
		if _, err := apply.Drop(h.ctx, apply.DropConfig{Target: h.pair.Target.ConnString("postgres"), Name: "big"}); err != nil {
			t.Fatalf("drop: %v", err)
		}
		h.expect(`SELECT count(*)::text FROM pg_replication_origin`, "0")
	})
}

// TestParallelCompacted runs the scenarios whose order and savepoints
// matter with stream blocks of many changes (logical_decoding_work_mem
// alone), so that a worker's net state (compaction, COPY) holds many rows
// when a savepoint is defined or rolled back to.
func TestParallelCompacted(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := parallelHarness(t, version, map[string]string{"logical_decoding_work_mem": "64kB"})
		h.both(`CREATE TABLE il (id int PRIMARY KEY, v text)`, `CREATE TABLE sp (id int PRIMARY KEY, v text)`)
		h.source(`CREATE TABLE ex (id int PRIMARY KEY, v text)`)
		h.target(`CREATE TABLE ex (n int DEFAULT 42, id int PRIMARY KEY, added date DEFAULT '2000-01-01',
			v text, twice int GENERATED ALWAYS AS (id * 2) STORED)`)
		h.source(`CREATE PUBLICATION pub FOR TABLE il, sp, ex`)
		h.createSlot("s")
		cfg, logs := h.streamConfig("s", "parallel", "pub")
		stop := h.runApplier(cfg)
		streamInterleaved(h)
		streamSavepoints(h, logs)
		streamExtraColumns(h)
		if n := parallelApplied(logs); n != 4 {
			t.Errorf("%d streamed transactions applied as they streamed, want 4", n)
		}
		if err := stop(); err != nil {
			t.Fatalf("applier: %v", err)
		}
	})
}
