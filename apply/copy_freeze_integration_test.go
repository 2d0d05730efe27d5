package apply_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// frozenSQL tells of target table %[1]s whether every page holding rows
// is marked all-frozen in the visibility map, as COPY FREEZE leaves it:
// "true|frozen pages|pages with rows". (The empty pages a bulk extension
// of the table left at its end, PostgreSQL 16 on, are not marked.)
const frozenSQL = `SELECT (count(*) FILTER (WHERE v.all_frozen) = count(*))::text || '|' || count(*) FILTER (WHERE v.all_frozen) || '|' || count(*)
FROM pg_visibility('%[1]s') v WHERE v.blkno IN (SELECT DISTINCT (ctid::text::point)[0]::bigint FROM %[1]s)`

// TestCopySchemaFreeze: with --schema, a table the pre-data section
// created and copied whole is truncated and copied with COPY FREEZE in
// its copy's transaction: every page is all-frozen afterwards. A table
// that was already on the target (empty, the same as the source's; left
// alone by --schema) is never truncated, its relfilenode unchanged, and
// is copied without FREEZE. Both tables' rows are the source's.
func TestCopySchemaFreeze(t *testing.T) {
	t.Parallel()
	schemaPairs(t, func(t *testing.T, h *harness) {
		h.source(`CREATE TABLE made (id int PRIMARY KEY, note text NOT NULL)`,
			`CREATE INDEX made_note ON made (note)`,
			`CREATE TABLE kept (id int PRIMARY KEY, note text NOT NULL)`,
			`INSERT INTO made SELECT i, 'made ' || i FROM generate_series(1, 20000) i`,
			`INSERT INTO kept SELECT i, 'kept ' || i FROM generate_series(1, 5000) i`,
			`CREATE PUBLICATION pub FOR TABLE made, kept`)
		h.target(`CREATE EXTENSION pg_visibility`,
			`CREATE TABLE kept (id int PRIMARY KEY, note text NOT NULL)`)
		node := func() string {
			return h.scalar(false, `SELECT relfilenode::text FROM pg_class WHERE oid = 'kept'::regclass`)
		}
		before := node()
		cfg := h.config("sslot", "pub")
		cfg.CreateSlot, cfg.Copy, cfg.Schema = false, true, true
		stop := h.runApplier(cfg)
		h.waitCopyDone(2*time.Minute, nil)
		h.waitCaughtUp("sslot", time.Minute)
		if err := stop(); err != nil && !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		if got := h.scalar(false, fmt.Sprintf(frozenSQL, "made")); !strings.HasPrefix(got, "true|") {
			t.Errorf("made, created by --schema: all-frozen|frozen pages|pages = %s, want every page frozen (COPY FREEZE)", got)
		}
		if got := h.scalar(false, fmt.Sprintf(frozenSQL, "kept")); !strings.HasPrefix(got, "false|") {
			t.Errorf("kept, already on the target: all-frozen|frozen pages|pages = %s, want it copied without FREEZE", got)
		}
		if after := node(); after != before {
			t.Errorf("kept, already on the target, was truncated: relfilenode %s, was %s", after, before)
		}
		for _, tbl := range []string{"made", "kept"} {
			if n := h.compare(tableRows(tbl, "")); n == 0 {
				t.Errorf("%s: no rows compared", tbl)
			}
		}
	})
}
