package apply_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/testenv"
)

// copyWriter writes to the source until stopped: the concurrent load of
// the copy tests. Each step is one transaction.
type copyWriter struct {
	t       *testing.T
	commits atomic.Int64
	stop    chan struct{}
	done    chan error
}

func (h *harness) startCopyWriter(step func(ctx context.Context, tx pgx.Tx, i int) error) *copyWriter {
	h.t.Helper()
	conn, err := h.pair.Source.Connect(h.ctx, "postgres")
	if err != nil {
		h.t.Fatal(err)
	}
	w := &copyWriter{t: h.t, stop: make(chan struct{}), done: make(chan error, 1)}
	go func() {
		defer conn.Close(context.Background())
		for i := 1; ; i++ {
			select {
			case <-w.stop:
				w.done <- nil
				return
			default:
			}
			if err := pgx.BeginFunc(h.ctx, conn, func(tx pgx.Tx) error { return step(h.ctx, tx, i) }); err != nil {
				w.done <- fmt.Errorf("writer step %d: %w", i, err)
				return
			}
			w.commits.Add(1)
		}
	}()
	h.t.Cleanup(func() { w.finish() })
	return w
}

// waitMore waits until the writer has committed n more transactions than
// it had when called.
func (w *copyWriter) waitMore(n int64) error {
	target := w.commits.Load() + n
	deadline := time.Now().Add(2 * time.Minute)
	for w.commits.Load() < target {
		select {
		case err := <-w.done:
			w.done <- err
			return fmt.Errorf("the writer stopped: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the writer did not commit %d transactions within 2 minutes", n)
		}
	}
	return nil
}

// finish stops the writer and returns its error.
func (w *copyWriter) finish() error {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	err := <-w.done
	w.done <- err
	return err
}

// copySchema creates the tables of the copy tests on both sides: shapes the
// copy must get right (another column order, extra and generated target
// columns, a partitioned table published through its root, a row filter),
// and big, large enough to take a while.
func (h *harness) copySchema(bigRows int) {
	h.t.Helper()
	h.source(
		`CREATE TABLE big (id bigint PRIMARY KEY, v int NOT NULL, pad text)`,
		fmt.Sprintf(`INSERT INTO big SELECT g, g %% 1000, repeat(md5(g::text), 3) FROM generate_series(1, %d) g`, bigRows),
		`CREATE TABLE small (id serial PRIMARY KEY, note text)`,
		`INSERT INTO small (note) SELECT 'row ' || g FROM generate_series(1, 300) g`,
		`CREATE TABLE parted (id int NOT NULL, k int NOT NULL, PRIMARY KEY (id, k)) PARTITION BY RANGE (k)`,
		`CREATE TABLE parted_1 PARTITION OF parted FOR VALUES FROM (0) TO (100)`,
		`CREATE TABLE parted_2 PARTITION OF parted FOR VALUES FROM (100) TO (200)`,
		`INSERT INTO parted SELECT g, g % 200 FROM generate_series(1, 1000) g`,
		`CREATE TABLE filtered (id int PRIMARY KEY, keep bool NOT NULL)`,
		`ALTER TABLE filtered REPLICA IDENTITY FULL`,
		`INSERT INTO filtered SELECT g, g % 3 = 0 FROM generate_series(1, 500) g`,
		`CREATE TABLE gen (id int PRIMARY KEY, a int NOT NULL, b int GENERATED ALWAYS AS (a * 2) STORED)`,
		`INSERT INTO gen (id, a) SELECT g, g FROM generate_series(1, 100) g`,
		`CREATE PUBLICATION pub FOR TABLE big, small, gen, filtered WHERE (keep)`,
		`CREATE PUBLICATION pubp FOR TABLE parted WITH (publish_via_partition_root = true)`,
	)
	h.target(
		`CREATE TABLE big (id bigint PRIMARY KEY, v int NOT NULL, pad text)`,
		`CREATE TABLE small (note text, extra text DEFAULT 'target default', id int PRIMARY KEY)`,
		`CREATE TABLE parted (id int NOT NULL, k int NOT NULL, PRIMARY KEY (id, k)) PARTITION BY RANGE (k)`,
		`CREATE TABLE parted_1 PARTITION OF parted FOR VALUES FROM (0) TO (100)`,
		`CREATE TABLE parted_2 PARTITION OF parted FOR VALUES FROM (100) TO (200)`,
		`CREATE TABLE filtered (id int PRIMARY KEY, keep bool NOT NULL)`,
		`CREATE TABLE gen (id int PRIMARY KEY, a int NOT NULL, b int GENERATED ALWAYS AS (a * 2) STORED)`,
	)
}

// copyStep is one transaction of the writer on copySchema's tables:
// inserts, updates and deletes, some moving rows in and out of the row
// filter; every 25th also inserts 1000 rows, which a source with
// logical_decoding_work_mem = 64kB streams before it commits (the
// applier spills it and replays it at its commit).
func copyStep(bigRows int) func(ctx context.Context, tx pgx.Tx, i int) error {
	return func(ctx context.Context, tx pgx.Tx, i int) error {
		if i%25 == 0 {
			if _, err := tx.Exec(ctx, `INSERT INTO big SELECT g, 0, 'bulk' FROM generate_series($1::int, $1::int + 999) g`, 2_000_000+i*1000); err != nil {
				return err
			}
		}
		for _, s := range []struct {
			sql  string
			args []any
		}{
			{`INSERT INTO small (note) VALUES ($1)`, []any{fmt.Sprintf("written %d", i)}},
			{`UPDATE big SET v = v + 1, pad = 'updated' WHERE id = $1`, []any{i*7919%bigRows + 1}},
			{`INSERT INTO big VALUES ($1, $2, 'inserted')`, []any{1_000_000 + i, i}},
			{`DELETE FROM big WHERE id = $1`, []any{i*104729%bigRows + 1}},
			{`INSERT INTO parted VALUES ($1, $2)`, []any{100_000 + i, i % 200}},
			{`UPDATE filtered SET keep = NOT keep WHERE id = $1`, []any{i%500 + 1}},
			{`INSERT INTO filtered VALUES ($1, $2)`, []any{10_000 + i, i%2 == 0}},
			{`UPDATE gen SET a = a + 1 WHERE id = $1`, []any{i%100 + 1}},
		} {
			if _, err := tx.Exec(ctx, s.sql, s.args...); err != nil {
				return fmt.Errorf("%s: %w", s.sql, err)
			}
		}
		return nil
	}
}

// waitCopyDone waits until walapply.copies on the target says the initial
// copy finished. p, if not nil, is an applier process that must not exit
// meanwhile (else the in-process applier must not stop).
func (h *harness) waitCopyDone(timeout time.Duration, p *applierProcess) {
	h.t.Helper()
	h.pollTarget(timeout, p, "the initial copy", func(conn *pgx.Conn) (bool, error) {
		var done bool
		err := conn.QueryRow(h.ctx, `SELECT EXISTS (SELECT 1 FROM walapply.copies WHERE finished_at IS NOT NULL)`).Scan(&done)
		if err != nil && strings.Contains(err.Error(), "does not exist") {
			return false, nil
		}
		return done, err
	})
}

// compareCopy compares copySchema's tables row by row.
func (h *harness) compareCopy() int {
	h.t.Helper()
	n := 0
	for _, q := range []string{
		tableRows("big", ""),
		tableRows("small", "id, note"),
		tableRows("parted", ""),
		tableRows("gen", ""),
	} {
		if c := h.compare(q); c == 0 {
			h.t.Errorf("%s: no rows on the source; the comparison proves nothing", q)
		} else {
			n += c
		}
	}
	src := h.rows(h.pair.Source, `SELECT (id, keep)::text FROM filtered WHERE keep`)
	dst := h.rows(h.pair.Target, `SELECT (id, keep)::text FROM filtered`)
	if !slices.Equal(src, dst) {
		h.t.Errorf("filtered: the target does not hold exactly the source's rows that pass the publication's row filter:\n%s", diffRows(src, dst))
	}
	if got := h.rows(h.pair.Target, `SELECT DISTINCT extra FROM small`); !slices.Equal(got, []string{"target default"}) {
		t := h.t
		t.Errorf("small.extra on the target = %q, want only its default", got)
	}
	return n + len(src)
}

// TestCopyFollowUnderWrites copies a source that is being written to and
// follows it: the slot's snapshot and its stream must meet exactly, with no
// row missed and none applied twice.
func TestCopyFollowUnderWrites(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		const bigRows = 60_000
		h := newHarness(t, version, map[string]string{"logical_decoding_work_mem": "64kB"}, nil)
		h.copySchema(bigRows)
		w := h.startCopyWriter(copyStep(bigRows))
		if err := w.waitMore(20); err != nil { // writes before the slot exists
			t.Fatal(err)
		}

		var (
			once, doneOnce sync.Once
			pauseErr       error
			done           = make(chan apply.CopyProgress, 1)
			progress       []apply.CopyProgress
			mu             sync.Mutex
		)
		cfg := h.config("copyslot", "pub", "pubp")
		cfg.CreateSlot = false
		cfg.Copy = true
		cfg.CopyWorkers = 2
		cfg.OnCopyProgress = func(p apply.CopyProgress) {
			mu.Lock()
			progress = append(progress, p)
			mu.Unlock()
			if p.Table != "" {
				// Hold the copy after its first table until the source
				// has moved on: those writes are in no table's snapshot
				// and must come through the stream, also for the tables
				// still to be copied.
				once.Do(func() { pauseErr = w.waitMore(30) })
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
		if final.TablesDone != 5 || final.TablesTotal != 5 || final.Rows < bigRows {
			t.Errorf("final progress %+v: want 5 of 5 tables and at least %d rows", final, bigRows)
		}
		if err := w.waitMore(50); err != nil { // writes while following
			t.Fatal(err)
		}
		if err := w.finish(); err != nil {
			t.Fatal(err)
		}
		h.waitCaughtUp("copyslot", 2*time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		n := h.compareCopy()

		// One snapshot for every table: the slot's.
		h.expect(`SELECT count(*)::text FROM walapply.copy_state s JOIN walapply.copies c USING (applier)
			WHERE s.status = 'done' AND s.copy_lsn = c.consistent_point AND c.finished_at IS NOT NULL`, "5")
		mu.Lock()
		var perTable []string
		for _, p := range progress {
			if p.Table != "" {
				perTable = append(perTable, p.Table)
			}
		}
		mu.Unlock()
		slices.Sort(perTable)
		if want := []string{`"public"."big"`, `"public"."filtered"`, `"public"."gen"`, `"public"."parted"`, `"public"."small"`}; !slices.Equal(perTable, want) {
			t.Errorf("OnCopyProgress named the tables %q, want each once: %q", perTable, want)
		}
		t.Logf("PostgreSQL %d: copied %d rows (%d bytes) in %s, %d concurrent transactions, %d rows compared, all equal",
			version, final.Rows, final.Bytes, final.Elapsed.Round(time.Millisecond), w.commits.Load(), n)

		// A restart with --copy again (as a sidecar's fixed command line
		// would) does not copy again.
		stop = h.runApplier(cfg)
		h.source(`INSERT INTO small (note) VALUES ('after the restart')`)
		h.waitCaughtUp("copyslot", time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		h.compare(tableRows("small", "id, note"))
	})
}

// TestCopyChecks: what keeps the copy from starting is reported all at
// once, before anything is created on either side.
func TestCopyChecks(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, nil)
		h.source(
			`CREATE TABLE a (id int PRIMARY KEY, x int, y int)`,
			`CREATE TABLE b (id int PRIMARY KEY)`,
			`CREATE TABLE "we""ird" (id int PRIMARY KEY)`,
			`CREATE TABLE d (id int PRIMARY KEY)`,
			`CREATE TABLE e (id int PRIMARY KEY)`,
			`INSERT INTO a VALUES (1, 2, 3)`,
			`CREATE PUBLICATION pub FOR TABLE a, b, "we""ird", d, e`,
		)
		h.target(
			`CREATE TABLE a (id int PRIMARY KEY)`, // lacks x and y
			`CREATE TABLE d (id int PRIMARY KEY)`, // not empty
			`CREATE TABLE e (id int PRIMARY KEY)`, // fine
			`INSERT INTO d VALUES (1)`,
		)
		cfg := h.config("checkslot", "pub")
		cfg.CreateSlot, cfg.Copy = false, true
		ctx, cancel := context.WithTimeout(h.ctx, 2*time.Minute)
		defer cancel()
		err := apply.Run(ctx, cfg)
		var ce *apply.CopyCheckError
		if !errors.As(err, &ce) {
			t.Fatalf("Run = %v, want a *apply.CopyCheckError", err)
		}
		if want := []string{`"public"."b"`, `"public"."we""ird"`}; !slices.Equal(ce.MissingTables, want) {
			t.Errorf("MissingTables = %q, want %q", ce.MissingTables, want)
		}
		if got := ce.MissingColumns[`"public"."a"`]; !slices.Equal(got, []string{`"x"`, `"y"`}) || len(ce.MissingColumns) != 1 {
			t.Errorf("MissingColumns = %q, want a lacking x and y", ce.MissingColumns)
		}
		if want := []string{`"public"."d"`}; !slices.Equal(ce.NotEmpty, want) {
			t.Errorf("NotEmpty = %q, want %q", ce.NotEmpty, want)
		}
		t.Logf("the error: %v", err)
		if got := h.rows(h.pair.Source, `SELECT slot_name::text FROM pg_replication_slots`); len(got) != 0 {
			t.Errorf("slots on the source after the failed check: %q, want none", got)
		}
		h.expect(`SELECT applier FROM walapply.copies`)

		// Fixed, the copy runs.
		h.target(
			`ALTER TABLE a ADD COLUMN x int, ADD COLUMN y int`,
			`CREATE TABLE b (id int PRIMARY KEY)`,
			`CREATE TABLE "we""ird" (id int PRIMARY KEY)`,
			`TRUNCATE d`,
		)
		if version >= 16 {
			// Decoding on the target sees what its own subscribers would.
			h.target(`CREATE PUBLICATION tpub FOR TABLE a, e`,
				`SELECT pg_create_logical_replication_slot('tslot', 'pgoutput')`)
		}
		stop := h.runApplier(cfg)
		h.waitCopyDone(time.Minute, nil)
		h.source(`INSERT INTO e VALUES (1)`)
		h.waitCaughtUp("checkslot", time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		h.expect(tableRows("a", "id, x, y"), "(1,2,3)")
		h.expect(tableRows("e", "id"), "1")
		h.expect(`SELECT (finished_at IS NOT NULL)::text FROM walapply.copies`, "true")
		// The copy workers' origins are gone.
		h.expect(`SELECT roname::text FROM pg_replication_origin`, "walapply_checkslot")
		if version >= 16 {
			// The copied rows, like the replicated ones, carry an origin: a
			// subscriber of the target asking for origin = none gets
			// nothing of them.
			peek := `SELECT count(*)::text FROM pg_logical_slot_peek_binary_changes('tslot', NULL, NULL,
				'proto_version', '1', 'publication_names', 'tpub', 'origin', '%s') WHERE get_byte(data, 0) = ascii('I')`
			h.expect(fmt.Sprintf(peek, "any"), "2")
			h.expect(fmt.Sprintf(peek, "none"), "0")
		}
	})
}

// TestCopyTwoPhase: the copy creates a two-phase slot when asked, and
// prepared transactions after the copy replicate at PREPARE.
func TestCopyTwoPhase(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, nil)
		h.source(`CREATE TABLE t (id int PRIMARY KEY, v text)`,
			`INSERT INTO t SELECT g, 'before' FROM generate_series(1, 100) g`,
			`CREATE PUBLICATION pub FOR TABLE t`)
		h.target(`CREATE TABLE t (id int PRIMARY KEY, v text)`)
		cfg := h.config("tpslot", "pub")
		cfg.CreateSlot, cfg.Copy, cfg.TwoPhase = false, true, true
		stop := h.runApplier(cfg)
		h.waitCopyDone(time.Minute, nil)
		if got := h.rows(h.pair.Source, `SELECT two_phase::text FROM pg_replication_slots WHERE slot_name = 'tpslot'`); !slices.Equal(got, []string{"true"}) {
			t.Errorf("the copy's slot: two_phase = %q, want true", got)
		}
		conn, err := h.pair.Source.Connect(h.ctx, "postgres")
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(h.ctx)
		for _, s := range []string{`BEGIN`, `INSERT INTO t VALUES (101, 'prepared')`, `UPDATE t SET v = 'prepared' WHERE id = 1`, `PREPARE TRANSACTION 'tp1'`} {
			if _, err := conn.Exec(h.ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		h.waitTarget(t, nil, `SELECT count(*) = 1 FROM pg_prepared_xacts`)
		h.source(`COMMIT PREPARED 'tp1'`)
		h.waitCaughtUp("tpslot", time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if n := h.compare(tableRows("t", "")); n != 101 {
			t.Errorf("%d rows compared, want 101", n)
		}
	})
}
