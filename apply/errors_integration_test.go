package apply_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/testenv"
)

// originProgress reads the applier's origin progress on the target.
func (h *harness) originProgress(name string) string {
	h.t.Helper()
	rows := h.rows(h.pair.Target, "SELECT COALESCE(pg_replication_origin_progress('walapply_"+name+"', false)::text, 'none')")
	return rows[0]
}

// runUntilError runs the applier until it returns, which a permanent
// error makes it do.
func runUntilError(t *testing.T, cfg apply.Config) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := apply.Run(ctx, cfg)
	if ctx.Err() != nil {
		t.Fatal("the applier did not stop on a permanent error")
	}
	return err
}

// TestPermanentErrors: a target that cannot take a transaction stops the
// applier with a clear error, the origin does not move past the failed
// transaction, and once the user fixes the target a restart applies it.
func TestPermanentErrors(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, nil)
		h.source(`CREATE TABLE ok_t (id int PRIMARY KEY)`, `CREATE TABLE missing_t (id int PRIMARY KEY, v text)`,
			`CREATE TABLE typed_t (id int PRIMARY KEY, v text)`, `CREATE TABLE dup_t (id int PRIMARY KEY)`,
			`CREATE TABLE typed_many (id int PRIMARY KEY, v text)`,
			`CREATE PUBLICATION pub FOR TABLE ok_t, missing_t, typed_t, dup_t, typed_many`)
		h.target(`CREATE TABLE ok_t (id int PRIMARY KEY)`, `CREATE TABLE typed_t (id int PRIMARY KEY, v int)`,
			`CREATE TABLE dup_t (id int PRIMARY KEY)`, `CREATE TABLE typed_many (id int PRIMARY KEY, v int)`)
		h.createSlot("perm")
		cfg := h.config("perm", "pub")

		// 1. The target table is missing.
		h.source(`INSERT INTO ok_t VALUES (1)`)
		h.source(`BEGIN; INSERT INTO ok_t VALUES (2); INSERT INTO missing_t VALUES (1, 'a'); COMMIT;`)
		err := runUntilError(t, cfg)
		var te *apply.TxnError
		if !errors.As(err, &te) || !strings.Contains(err.Error(), `"public"."missing_t"`) || !strings.Contains(err.Error(), "does not exist") {
			t.Fatalf("missing table: want a TxnError naming public.missing_t, got %v", err)
		}
		if te.CommitLSN == 0 || te.Xid == 0 {
			t.Errorf("the error does not name the source transaction: %v", err)
		}
		t.Logf("missing table: %v", err)
		before := h.originProgress("perm")
		h.expect(tableRows("ok_t", ""), "(1)") // nothing of the failed transaction
		if apply.IsTransient(err) {
			t.Error("a missing table is reported as transient")
		}
		if pe := (*apply.PermanentError)(nil); !errors.As(err, &pe) {
			t.Errorf("missing table: no PermanentError in the chain of %v", err)
		}
		// Retrying changes nothing.
		if err := runUntilError(t, cfg); err == nil {
			t.Fatal("second run succeeded")
		}
		if after := h.originProgress("perm"); after != before {
			t.Errorf("origin moved from %s to %s past a failed transaction", before, after)
		}
		h.target(`CREATE TABLE missing_t (id int PRIMARY KEY, v text)`)

		// 2. An incompatible column type.
		h.source(`INSERT INTO typed_t VALUES (1, 'not a number')`)
		err = runUntilError(t, cfg)
		if !strings.Contains(err.Error(), `INSERT on "public"."typed_t": column "v" (integer on the target)`) {
			t.Fatalf("type mismatch: want an error naming the INSERT on public.typed_t and its column v, got %v", err)
		}
		t.Logf("type mismatch: %v", err)
		h.expect(tableRows("missing_t", ""), "(1,a)")
		h.target(`ALTER TABLE typed_t ALTER COLUMN v TYPE text`)

		// 2b. The same in a transaction of many rows, which net-effect
		// compaction writes as one multi-row statement whose casts name no
		// column: the retry row by row names it. A new applier, so that the
		// transaction is the first of its group (a later one in a group is
		// retried without grouping anyway).
		h.createSlot("perm_many")
		h.source(`INSERT INTO typed_many SELECT g, CASE WHEN g = 15 THEN 'bad' ELSE g::text END FROM generate_series(10, 19) g`)
		err = runUntilError(t, h.config("perm_many", "pub"))
		if !strings.Contains(err.Error(), `INSERT on "public"."typed_many": column "v" (integer on the target)`) {
			t.Fatalf("type mismatch in a multi-row statement: want the column v named, got %v", err)
		}
		t.Logf("type mismatch, many rows: %v", err)
		h.target(`ALTER TABLE typed_many ALTER COLUMN v TYPE text`)

		// 3. A duplicate key on insert (insert_exists) stops with nothing of
		// the transaction applied.
		h.target(`INSERT INTO dup_t VALUES (5)`)
		h.source(`BEGIN; INSERT INTO ok_t VALUES (3); INSERT INTO dup_t VALUES (5); COMMIT;`)
		err = runUntilError(t, cfg)
		if !errors.As(err, &te) {
			t.Fatalf("duplicate key: not a TxnError: %v", err)
		}
		for _, want := range []string{`INSERT on "public"."dup_t"`, "23505", "Key (id)=(5) already exists",
			"--skip-lsn " + te.CommitLSN.String(), "--on-conflict insert_exists=skip", "insert_exists=apply"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("duplicate key: %q missing from %v", want, err)
			}
		}
		t.Logf("duplicate key: %v", err)
		h.expect(tableRows("ok_t", ""), "(1)", "(2)")
		h.target(`DELETE FROM dup_t`)

		// 4. An update or delete that finds no row is logged and skipped.
		h.target(`INSERT INTO ok_t VALUES (99)`)
		h.source(`INSERT INTO ok_t VALUES (10)`)
		stop := h.runApplier(cfg)
		h.waitCaughtUp("perm", time.Minute)
		h.target(`DELETE FROM ok_t WHERE id = 10`)
		h.source(`UPDATE ok_t SET id = 11 WHERE id = 10`, `DELETE FROM ok_t WHERE id = 11`, `INSERT INTO ok_t VALUES (12)`)
		h.waitCaughtUp("perm", time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		h.expect(tableRows("ok_t", ""), "(1)", "(2)", "(3)", "(12)", "(99)")
		h.expect(tableRows("typed_t", ""), "(1,\"not a number\")")
		h.expect(tableRows("dup_t", ""), "(5)")
	})
}

// TestWrongSourceRefused: an applier whose origin belongs to one cluster
// refuses to run against another.
func TestWrongSourceRefused(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, nil)
		h.both(`CREATE TABLE t (id int PRIMARY KEY)`)
		h.source(`CREATE PUBLICATION pub FOR TABLE t`)
		h.createSlot("who")
		cfg := h.config("who", "pub")
		stop := h.runApplier(cfg)
		h.source(`INSERT INTO t VALUES (1)`)
		h.waitCaughtUp("who", time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		other := testenv.NewCluster(t, testenv.Options{Version: version, FreshSystemID: true})
		h2 := &harness{t: t, pair: &testenv.Pair{Source: other, Target: h.pair.Target}, ctx: h.ctx}
		h2.source(`CREATE TABLE t (id int PRIMARY KEY)`, `CREATE PUBLICATION pub FOR TABLE t`)
		cfg2 := h2.config("who", "pub")
		err := runUntilError(t, cfg2)
		if !errors.Is(err, apply.ErrWrongSource) {
			t.Fatalf("want ErrWrongSource, got %v", err)
		}
		t.Logf("refused: %v", err)
	})
}
