package apply_test

import (
	"slices"
	"testing"
	"time"

	"github.com/walapply/walapply/testenv"
)

// TestCopyLargestFirst: with one worker, the tables are copied in order
// of their work (internal/initcopy/balance.go: the size on the source plus
// about 128 bytes a row), neither of their row estimates nor of their
// bytes alone: wide (the most bytes, the fewest rows) before narrow (the
// most rows, the fewest bytes) before medium (between the two in both,
// the least work). Largest first is what keeps the workers finishing
// together.
func TestCopyLargestFirst(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, nil)
		h.source(
			`CREATE TABLE narrow (id int PRIMARY KEY, v int NOT NULL)`,
			`INSERT INTO narrow SELECT g, g FROM generate_series(1, 30000) g`,
			`CREATE TABLE wide (id int PRIMARY KEY, pad text NOT NULL)`,
			`INSERT INTO wide SELECT g, left(repeat(md5(g::text), 32), 1000) FROM generate_series(1, 5000) g`,
			`CREATE TABLE medium (id int PRIMARY KEY, pad text NOT NULL)`,
			`INSERT INTO medium SELECT g, left(repeat(md5(g::text), 4), 100) FROM generate_series(1, 10000) g`,
			`ANALYZE narrow, wide, medium`, // the row estimates
			`CREATE PUBLICATION pub FOR TABLE narrow, wide, medium`,
		)
		h.target(
			`CREATE TABLE narrow (id int PRIMARY KEY, v int NOT NULL)`,
			`CREATE TABLE wide (id int PRIMARY KEY, pad text NOT NULL)`,
			`CREATE TABLE medium (id int PRIMARY KEY, pad text NOT NULL)`,
		)
		for _, c := range []struct{ by, order string }{
			{"pg_relation_size(oid)", "wide medium narrow"},
			{"reltuples", "narrow medium wide"},
			{"pg_relation_size(oid) + reltuples::bigint * 128", "wide narrow medium"},
		} {
			if got := h.rows(h.pair.Source, `SELECT string_agg(relname::text, ' ' ORDER BY `+c.by+` DESC) FROM pg_class WHERE relname IN ('narrow', 'wide', 'medium')`); !slices.Equal(got, []string{c.order}) {
				t.Fatalf("the tables by %s on the source: %q, want %s", c.by, got, c.order)
			}
		}
		cfg := h.config("lslot", "pub")
		cfg.CreateSlot, cfg.Copy, cfg.CopyWorkers = false, true, 1
		stop := h.runApplier(cfg)
		h.waitCopyDone(time.Minute, nil)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		// One worker, one table after the other: each table's
		// transaction began after the one before it finished.
		h.expect(`SELECT string_agg(table_name, ' ' ORDER BY finished_at) FROM walapply.copy_state`, "wide narrow medium")
		for _, tbl := range []string{"narrow", "wide", "medium"} {
			if h.compare(tableRows(tbl, "")) == 0 {
				t.Errorf("%s: no rows compared", tbl)
			}
		}
	})
}
