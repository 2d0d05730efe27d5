package apply_test

import (
	"testing"
	"time"

	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/testenv"
)

// TestCopyBalanced copies, with the split size at its default and two
// workers, a table of many narrow rows (the most work, not the most
// bytes) beside a table of fewer wide rows: neither reaches the split
// size, but the narrow one would keep one worker copying alone, so it is
// cut into ranges (internal/initcopy/balance.go, its minimum lowered
// through the seam) and the wide one is copied whole; into a target
// before PostgreSQL 16 nothing is cut. With the split size set, the copy
// follows it and cuts nothing.
func TestCopyBalanced(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, nil)
		h.source(
			`CREATE TABLE narrow (id int PRIMARY KEY, v int NOT NULL)`,
			`INSERT INTO narrow SELECT g, g % 7 FROM generate_series(1, 20000) g`,
			`CREATE TABLE wide (id int PRIMARY KEY, payload text NOT NULL)`,
			`INSERT INTO wide SELECT g, repeat(md5(g::text), 32) FROM generate_series(1, 1000) g`,
			`ANALYZE narrow, wide`,
			`CREATE PUBLICATION pub FOR TABLE narrow, wide`,
		)
		run := func(slot string, set int64) {
			t.Helper()
			h.target(
				`DROP TABLE IF EXISTS narrow, wide`,
				`CREATE TABLE narrow (id int PRIMARY KEY, v int NOT NULL)`,
				`CREATE TABLE wide (id int PRIMARY KEY, payload text NOT NULL)`,
			)
			cfg := h.config(slot, "pub")
			cfg.Name = slot
			cfg.Copy, cfg.CopyWorkers, cfg.CopySplitSize = true, 2, set
			apply.SetBalanceMin(&cfg, 16<<10)
			stop := h.runApplier(cfg)
			h.waitCaughtUp(slot, 2*time.Minute)
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			h.compare(tableRows("narrow", ""))
			h.compare(tableRows("wide", ""))
		}

		run("balanced", 0)
		if version >= 16 {
			h.expect(`SELECT table_name || ' ' || split_by || ' ' || count(*)::text || ' ' || bool_and(status = 'done')::text
				FROM walapply.copy_ranges WHERE applier = 'balanced' GROUP BY table_name, split_by`, "narrow id 3 true")
		} else {
			// Not into a target before 16 (balance.go says why).
			h.expect(`SELECT count(*)::text FROM walapply.copy_ranges WHERE applier = 'balanced'`, "0")
		}
		h.expect(`SELECT table_name || ' ' || status FROM walapply.copy_state WHERE applier = 'balanced'`, "narrow done", "wide done")

		run("set", 1<<30)
		h.expect(`SELECT count(*)::text FROM walapply.copy_ranges WHERE applier = 'set'`, "0")
		h.expect(`SELECT table_name || ' ' || status FROM walapply.copy_state WHERE applier = 'set'`, "narrow done", "wide done")
	})
}
