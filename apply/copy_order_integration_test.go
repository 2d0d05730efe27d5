package apply_test

import (
	"slices"
	"testing"
	"time"

	"github.com/walapply/walapply/testenv"
)

// TestCopyLargestFirst: with one worker, the tables are copied in order
// of their size on the source, not of their row estimates: wide (fewer
// rows, more bytes) before narrow (more rows), and a third table of fewer
// rows and bytes still last. Largest first is what keeps the workers
// finishing together.
func TestCopyLargestFirst(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, nil)
		h.source(
			`CREATE TABLE narrow (id int PRIMARY KEY, v int NOT NULL)`,
			`INSERT INTO narrow SELECT g, g FROM generate_series(1, 30000) g`,
			`CREATE TABLE wide (id int PRIMARY KEY, pad text NOT NULL)`,
			`INSERT INTO wide SELECT g, left(repeat(md5(g::text), 32), 1000) FROM generate_series(1, 2000) g`,
			`CREATE TABLE tiny (id int PRIMARY KEY)`,
			`INSERT INTO tiny SELECT generate_series(1, 100)`,
			`ANALYZE narrow, wide, tiny`, // row estimates: narrow's are the most
			`CREATE PUBLICATION pub FOR TABLE narrow, wide, tiny`,
		)
		h.target(
			`CREATE TABLE narrow (id int PRIMARY KEY, v int NOT NULL)`,
			`CREATE TABLE wide (id int PRIMARY KEY, pad text NOT NULL)`,
			`CREATE TABLE tiny (id int PRIMARY KEY)`,
		)
		if got := h.rows(h.pair.Source, `SELECT string_agg(relname::text, ' ' ORDER BY pg_relation_size(oid) DESC) FROM pg_class WHERE relname IN ('narrow', 'wide', 'tiny')`); !slices.Equal(got, []string{"wide narrow tiny"}) {
			t.Fatalf("the tables by size on the source: %q, want wide narrow tiny", got)
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
		h.expect(`SELECT string_agg(table_name, ' ' ORDER BY finished_at) FROM walapply.copy_state`, "wide narrow tiny")
		for _, tbl := range []string{"narrow", "wide", "tiny"} {
			if h.compare(tableRows(tbl, "")) == 0 {
				t.Errorf("%s: no rows compared", tbl)
			}
		}
	})
}
