package apply_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/testenv"
)

// ddlLoad writes to table on the source until stopped: inserts and
// updates of the columns id and v, a few per 10 ms. It returns how many
// transactions it committed.
func (h *harness) ddlLoad(table string) (stop func() int) {
	ctx, cancel := context.WithCancel(h.ctx)
	conn := h.conn(true)
	var wg sync.WaitGroup
	n := 0
	var loadErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1; ctx.Err() == nil; i++ {
			if _, err := conn.Exec(ctx, fmt.Sprintf("INSERT INTO %s (id, v) VALUES ($1, $1)", table), i); err != nil {
				loadErr = err
				break
			}
			if _, err := conn.Exec(ctx, fmt.Sprintf("UPDATE %s SET v = v + 1 WHERE id = $1", table), i/2+1); err != nil {
				loadErr = err
				break
			}
			n += 2
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return func() int {
		cancel()
		wg.Wait()
		if loadErr != nil && !errors.Is(loadErr, context.Canceled) && !strings.Contains(loadErr.Error(), "canceled") {
			h.t.Fatalf("the load on the source: %v", loadErr)
		}
		return n
	}
}

// TestDDLUnderLoad: ADD, RENAME, DROP COLUMN, ALTER COLUMN TYPE, ADD and
// DROP CONSTRAINT and CREATE INDEX on a published table whose names need
// quoting, while a load writes to it, arrive in order; DDL on a table
// that is not published is logged and skipped. Both sides end with the
// same rows and the same table definition.
func TestDDLUnderLoad(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		requireDDLVersions(t, version)
		h := newHarness(t, version, nil, nil)
		const tbl = `"My Schema"."Order Items"`
		h.both(`CREATE SCHEMA "My Schema"`,
			`CREATE TABLE `+tbl+` (id int PRIMARY KEY, v int NOT NULL)`,
			`CREATE TABLE public.other (id int PRIMARY KEY)`, `CREATE TABLE public.r1 (id int PRIMARY KEY)`, `CREATE SCHEMA "In Schema"`,
			`CREATE TABLE public.pt (id int PRIMARY KEY) PARTITION BY RANGE (id)`, `CREATE TABLE public.pt_1 PARTITION OF public.pt FOR VALUES FROM (0) TO (10)`)
		h.source(`CREATE PUBLICATION pub FOR TABLE ` + tbl + `, public.r1, public.pt, TABLES IN SCHEMA "In Schema"`)
		h.installDDL()
		cfg, logs := h.ddlConfig("dslot", "off", "pub")
		h.runApplier(cfg)
		h.waitStreaming("dslot")
		stopLoad := h.ddlLoad(tbl)
		src := h.conn(true)
		steps := []string{
			`ALTER TABLE ` + tbl + ` ADD COLUMN "New Col" text DEFAULT 'x'`,
			`ALTER TABLE ` + tbl + ` RENAME COLUMN "New Col" TO "Renamed Col"`,
			`ALTER TABLE ` + tbl + ` ALTER COLUMN v TYPE bigint`,
			`ALTER TABLE ` + tbl + ` ADD CONSTRAINT "v positive" CHECK (v > 0)`,
			`CREATE INDEX "v idx" ON ` + tbl + ` (v)`,
			`ALTER TABLE ` + tbl + ` ADD COLUMN gone int`,
			// Changes before the statement in its transaction are
			// written out before it (compaction holds them).
			`BEGIN; INSERT INTO ` + tbl + ` (id, v, gone) VALUES (-1, 1, 1); UPDATE ` + tbl + ` SET gone = 2 WHERE id = -1;
			ALTER TABLE ` + tbl + ` DROP COLUMN gone; INSERT INTO ` + tbl + ` (id, v) VALUES (-2, 2); COMMIT`,
			`ALTER TABLE ` + tbl + ` DROP CONSTRAINT "v positive"`,
			`CREATE UNIQUE INDEX "doomed idx" ON ` + tbl + ` (id, v)`,
			`DROP INDEX "My Schema"."doomed idx"`,
			`ALTER TABLE public.other ADD COLUMN skipped int`,
		}
		for _, s := range steps {
			time.Sleep(30 * time.Millisecond) // some load between the statements
			if strings.HasPrefix(s, "BEGIN; ") {
				h.run(src, strings.Split(s, ";")...)
				continue
			}
			h.run(src, s)
		}
		// The source's search_path is the statement's.
		h.run(src, `SET search_path = "My Schema", public`)
		h.run(src, `ALTER TABLE "Order Items" ADD COLUMN "by path" int DEFAULT 7`)
		time.Sleep(30 * time.Millisecond)
		n := stopLoad()
		// A published table renamed and moved before any change of it:
		// known by its OID.
		h.run(src, `ALTER TABLE public.r1 RENAME TO r2`, `INSERT INTO public.r2 VALUES (1)`,
			`ALTER TABLE public.r2 SET SCHEMA "My Schema"`, `INSERT INTO "My Schema".r2 VALUES (2)`)
		// A table created in a FOR TABLES IN SCHEMA schema is published;
		// one created elsewhere is not.
		h.run(src, `CREATE TABLE "In Schema".n (id int PRIMARY KEY)`, `INSERT INTO "In Schema".n VALUES (1), (2)`,
			`CREATE TABLE public.unpublished (id int)`,
			`CREATE TABLE public.pt_2 PARTITION OF public.pt FOR VALUES FROM (10) TO (20)`, `INSERT INTO public.pt VALUES (5), (15)`,
			`GRANT SELECT ON `+tbl+` TO PUBLIC`)
		h.source(`UPDATE ` + tbl + ` SET "Renamed Col" = 'y' || id WHERE id % 3 = 0`)
		h.waitCaughtUp("dslot", time.Minute)
		rows := h.compare(tableRows(tbl, ""))
		h.compare(tableRows(`"My Schema".r2`, ""))
		h.compare(tableRows(`"In Schema".n`, ""))
		h.compare(tableRows(`public.pt`, ""))
		if h.scalar(false, `SELECT count(*)::text FROM pg_class WHERE relname = 'unpublished'`) != "0" {
			t.Errorf("a table created outside the publications was created on the target")
		}
		t.Logf("load: %d source transactions around %d DDL statements; %d rows equal on both sides", n, len(steps)+1, rows)
		h.compareSchemas(tbl, `"My Schema".r2`, `"In Schema".n`, "public.pt_2")
		if h.hasColumn(false, "public.other", "skipped") {
			t.Errorf("DDL on a table that is not published was applied")
		}
		for _, retry := range []string{"failed inside a group", "transient error"} {
			if n := logs.Count(retry); n != 0 {
				t.Errorf("%d log lines with %q: a DDL statement failed and was retried", n, retry)
			}
		}
		if logs.Count("touches no published table") == 0 {
			t.Errorf("DDL on a table that is not published was not logged as skipped")
		}
	})
}

// TestDDLNewTablesAndRollback: a table created under a FOR ALL TABLES
// publication is created on the target and its rows arrive (in the same
// and later transactions); DDL in a rolled-back transaction or
// subtransaction is not replicated; a statement that fails on the target
// stops the applier with a permanent error naming the statement, the
// transaction and the LSN, with nothing of its transaction applied.
func TestDDLNewTablesAndRollback(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		requireDDLVersions(t, version)
		h := newHarness(t, version, nil, nil)
		h.both(`CREATE TABLE t (id int PRIMARY KEY, v int)`)
		h.source(`CREATE PUBLICATION pub FOR ALL TABLES`)
		h.installDDL()
		cfg, logs := h.ddlConfig("nslot", "off", "pub")
		h.runApplier(cfg)
		h.waitStreaming("nslot")
		src := h.conn(true)
		h.run(src, `BEGIN`, `CREATE TABLE "New Table" (id serial PRIMARY KEY, "Val" text NOT NULL)`,
			`INSERT INTO "New Table" ("Val") VALUES ('a'), ('b')`, `COMMIT`)
		h.source(`INSERT INTO "New Table" ("Val") SELECT 'r' || g FROM generate_series(1, 50) g`)
		h.run(src, `BEGIN`, `ALTER TABLE t ADD COLUMN rolled_back int`, `INSERT INTO t VALUES (1, 1)`, `ROLLBACK`)
		h.run(src, `BEGIN`, `INSERT INTO t VALUES (2, 2)`, `SAVEPOINT s`, `ALTER TABLE t ADD COLUMN in_sub int`,
			`ROLLBACK TO SAVEPOINT s`, `ALTER TABLE t ADD COLUMN kept int`, `INSERT INTO t VALUES (3, 3, 33)`, `COMMIT`)
		// CREATE TABLE AS whose query finds no rows on the source (rows
		// it writes come before its message: a limit, README): the
		// target creates it empty too, though its query finds rows there.
		h.run(src, fmt.Sprintf(`CREATE TABLE copied AS SELECT id, "Val" FROM "New Table" WHERE current_setting('port')::int = %d`, h.pair.Target.Port()),
			`CREATE TABLE doomed (id int PRIMARY KEY)`, `INSERT INTO doomed VALUES (1)`, `DROP TABLE doomed`,
			`CREATE TEMP TABLE tmp_x (a int)`, `DROP TABLE tmp_x`)
		h.waitCaughtUp("nslot", time.Minute)
		h.compare(tableRows(`"New Table"`, ""))
		h.expect(tableRows("copied", ""))
		if h.scalar(false, `SELECT count(*)::text FROM pg_class WHERE relname = 'doomed'`) != "0" {
			t.Errorf("a dropped table is still on the target")
		}
		if logs.Count("tmp_x") != 0 {
			t.Errorf("DDL on a temporary table was captured")
		}
		h.compare(tableRows("t", ""))
		h.compareSchemas("t", `public."New Table"`, "public.copied")
		for _, c := range []string{"rolled_back", "in_sub"} {
			if h.hasColumn(false, "t", c) {
				t.Errorf("column %s of a rolled-back (sub)transaction is on the target", c)
			}
		}
		if got := h.scalar(false, `SELECT status FROM walapply.copy_state WHERE table_name = 'New Table'`); got != "existing" {
			t.Errorf("the created table's walapply.copy_state status is %q, want existing", got)
		}

		// A statement the target cannot run.
		h.target(`ALTER TABLE t ADD COLUMN clash int`)
		h.run(src, `BEGIN`, `INSERT INTO t VALUES (4, 4, 44)`, `ALTER TABLE t ADD COLUMN clash int`, `COMMIT`)
		var err error
		select {
		case err = <-h.applierDone:
		case <-time.After(time.Minute):
			t.Fatal("the applier did not stop at a failing DDL statement")
		}
		var pe *apply.PermanentError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), "ADD COLUMN clash") || !strings.Contains(err.Error(), "LSN") || !strings.Contains(err.Error(), "DDL") {
			t.Fatalf("want a permanent error naming the statement and LSN, got %v", err)
		}
		t.Logf("failing statement: %v", err)
		h.expect(`SELECT id::text FROM t`, "2", "3")
	})
}

// TestDDLStreamedAndPrepared: DDL inside a streamed transaction (spilled
// and replayed at Stream Commit) and inside a prepared one (--two-phase)
// is applied at its place: the changes after it use the new column.
func TestDDLStreamedAndPrepared(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		requireDDLVersions(t, version)
		settings := streamSettings(version)
		settings["max_prepared_transactions"] = "2"
		h := newHarness(t, version, settings, map[string]string{"max_prepared_transactions": "2"})
		h.both(`CREATE TABLE t (id int PRIMARY KEY, v text)`)
		h.source(`CREATE PUBLICATION pub FOR TABLE t`)
		h.installDDL()
		h.twoPhaseSlot("sslot")
		cfg, logs := h.ddlConfig("sslot", "on", "pub")
		cfg.TwoPhase = true
		h.runApplier(cfg)
		h.waitStreaming("sslot")
		src := h.conn(true)
		h.run(src, `BEGIN`, `INSERT INTO t SELECT g, repeat('x', 100) FROM generate_series(1, 3000) g`,
			`ALTER TABLE t ADD COLUMN s int DEFAULT 0`,
			`INSERT INTO t SELECT g, 'y', g FROM generate_series(3001, 6000) g`,
			`UPDATE t SET s = -1 WHERE id % 1000 = 0`, `COMMIT`)
		h.waitCaughtUp("sslot", time.Minute)
		if h.streamedTxns("sslot") == "0" {
			t.Fatalf("the transaction was not streamed")
		}
		gid := gidOf(t, "sslot", h.prepareOnSource("p1", `INSERT INTO t VALUES (7001, 'p', 1)`, `ALTER TABLE t ADD COLUMN p int`, `INSERT INTO t VALUES (7002, 'p', 2, 3)`))
		h.waitPrepared(time.Minute, gid)
		if h.hasColumn(false, "t", "p") {
			t.Errorf("the prepared transaction's DDL is visible on the target before COMMIT PREPARED")
		}
		h.source(`COMMIT PREPARED 'p1'`)
		h.waitCaughtUp("sslot", time.Minute)
		h.expectNonePrepared()
		h.compare(tableRows("t", ""))
		h.compareSchemas("t")
		if n := logs.Count("applied captured DDL"); n != 2 {
			t.Errorf("%d DDL statements applied, want 2", n)
		}
	})
}

// TestDDLKill: walapply killed with SIGKILL after a DDL statement is
// committed on the target and before the source learned it (a long
// feedback interval), and before the next change: the next run starts
// from the origin's progress, which the statement's commit advanced, so
// the statement is not run again (it would fail: the column exists), and
// the changes after it arrive.
func TestDDLKill(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		requireDDLVersions(t, version)
		h := newHarness(t, version, nil, nil)
		h.both(`CREATE TABLE t (id int PRIMARY KEY, v int)`)
		h.source(`CREATE PUBLICATION pub FOR TABLE t`, `INSERT INTO t VALUES (1, 1)`)
		h.target(`INSERT INTO t VALUES (1, 1)`)
		h.installDDL()
		h.createSlot("kslot")
		args := []string{"--ddl", "--feedback-interval", "1h"}
		p := h.applierProcess("kslot", "pub", args...)
		p.start()
		h.source(`ALTER TABLE t ADD COLUMN c int DEFAULT 5`)
		after := h.scalar(true, `SELECT pg_current_wal_lsn()::text`)
		h.waitTarget(t, p, `SELECT count(*) = 1 FROM pg_attribute WHERE attrelid = 't'::regclass AND attname = 'c'`)
		p.kill()
		if h.scalar(true, `SELECT (confirmed_flush_lsn < $1::pg_lsn)::text FROM pg_replication_slots WHERE slot_name = 'kslot'`, after) != "true" {
			t.Fatalf("the source learned of the DDL's transaction before the kill: nothing is sent again")
		}
		h.source(`INSERT INTO t VALUES (2, 2, 22)`, `UPDATE t SET c = 11 WHERE id = 1`)
		if err := h.pair.Source.WaitSlotActive(h.ctx, "kslot", false, time.Minute); err != nil {
			t.Fatal(err)
		}
		p2 := h.applierProcess("kslot", "pub", "--ddl")
		p2.start()
		h.waitTarget(t, p2, `SELECT count(*) = 2 FROM t WHERE c > 5`)
		h.waitCaughtUp("kslot", time.Minute)
		h.compare(tableRows("t", ""))
		h.compareSchemas("t")
		p2.stop()
	})
}

// TestDDLRefused: a query string with two DDL statements (the simple
// query protocol), and DDL run inside a DO block, on a published table
// stop the applier with a permanent error naming the transaction; run by
// hand on the target and skipped with --skip-lsn at the commit LSN the
// error names, replication goes on.
func TestDDLRefused(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		requireDDLVersions(t, version)
		h := newHarness(t, version, nil, nil)
		h.both(`CREATE TABLE t (id int PRIMARY KEY)`)
		h.source(`CREATE PUBLICATION pub FOR TABLE t`)
		h.installDDL()
		h.createSlot("rslot")
		src := h.conn(true)
		for i, c := range []struct{ source, target, want string }{
			{`BEGIN; ALTER TABLE t ADD COLUMN z int; ROLLBACK; ALTER TABLE t ADD COLUMN a int; ALTER TABLE t ADD COLUMN b int`, `ALTER TABLE t ADD COLUMN a int, ADD COLUMN b int`, "several DDL statements and a ROLLBACK"},
			{`DO $$BEGIN EXECUTE 'ALTER TABLE t ADD COLUMN c int'; END$$`, `ALTER TABLE t ADD COLUMN c int`, "DO block"},
			// Any role may set the capture's count back: the second event
			// would be numbered 1 and run the first statement again.
			{`ALTER TABLE t ADD COLUMN IF NOT EXISTS d int; SELECT set_config('walapply_ddl.seq', '', false); ALTER TABLE t ADD COLUMN e int`,
				`ALTER TABLE t ADD COLUMN d int, ADD COLUMN e int`, "numbered 1, then 1"},
		} {
			if _, err := src.PgConn().Exec(h.ctx, c.source).ReadAll(); err != nil { // simple protocol
				t.Fatal(err)
			}
			h.source(fmt.Sprintf(`INSERT INTO t VALUES (%d)`, i))
			cfg := h.config("rslot", "pub")
			cfg.DDL = true
			err := apply.Run(h.ctx, cfg)
			var te *apply.TxnError
			if !errors.As(err, &te) || apply.IsTransient(err) || !strings.Contains(err.Error(), c.want) || te.Op != apply.OpDDL {
				t.Fatalf("%s: want a permanent DDL error saying %q, got %v", c.source, c.want, err)
			}
			t.Logf("refused: %v", err)
			h.target(c.target)
			cfg.SkipLSN = te.CommitLSN
			stop := h.runApplier(cfg)
			h.waitCaughtUp("rslot", time.Minute)
			if err := stop(); err != nil {
				t.Fatal(err)
			}
		}
		h.compare(tableRows("t", ""))
		h.compareSchemas("t")
	})
}
