package apply_test

import (
	"strings"
	"testing"
)

// TestCopySchemaEarlyBuilds: with --schema, a table's own index builds
// start as soon as its copy commits, before the next table's copy ends
// (one copy worker, so the order in the log is the order of events); the
// foreign key between them waits for both; the rest of the post-data
// section reports how many were built early; the target ends with every
// index, key and the foreign key, and the source's rows.
func TestCopySchemaEarlyBuilds(t *testing.T) {
	t.Parallel()
	schemaPairs(t, func(t *testing.T, h *harness) {
		h.source(`CREATE TABLE ea (id int PRIMARY KEY, v int NOT NULL, pad text NOT NULL)`,
			`CREATE INDEX ea_v ON ea (v)`,
			`INSERT INTO ea SELECT g, g % 97, md5(g::text) FROM generate_series(1, 8000) g`,
			`CREATE TABLE eb (id int PRIMARY KEY, a int NOT NULL REFERENCES ea (id), pad text NOT NULL)`,
			`INSERT INTO eb SELECT g, g, md5(g::text) FROM generate_series(1, 2000) g`,
			`ANALYZE ea`, `ANALYZE eb`,
			`CREATE PUBLICATION epub FOR TABLE ea, eb`)
		logs := h.copyWholeRun("eslot", "epub", 1)
		at := func(frags ...string) int {
			for i, line := range strings.Split(logs.String(), "\n") {
				if matches(line, frags) {
					return i
				}
			}
			t.Fatalf("no log line with %q; log:\n%s", frags, logs)
			return -1
		}
		aCopied, aBuilds := at("copied table", `"public.ea"`), at("now that it is copied", `"table":"public.ea"`, `"index_builds":2`)
		bCopied, bBuilds := at("copied table", `"public.eb"`), at("now that it is copied", `"table":"public.eb"`, `"index_builds":1`)
		done := at("post-data built on the target", `"built_early":3`, `"entries":4`)
		if !(aCopied < aBuilds && aBuilds < bCopied && bCopied < bBuilds && bBuilds < done) {
			t.Errorf("log lines out of order (ea copied %d, its builds %d, eb copied %d, its builds %d, post-data done %d); log:\n%s",
				aCopied, aBuilds, bCopied, bBuilds, done, logs)
		}
		h.expect(`SELECT conname || ' ' || contype::text FROM pg_constraint WHERE conrelid IN ('ea'::regclass, 'eb'::regclass) AND contype <> 'n' ORDER BY 1`,
			"ea_pkey p", "eb_a_fkey f", "eb_pkey p")
		h.expect(`SELECT indexname FROM pg_indexes WHERE tablename IN ('ea', 'eb') ORDER BY 1`, "ea_pkey", "ea_v", "eb_pkey")
		for _, tbl := range []string{"ea", "eb"} {
			if n := h.compare(tableRows(tbl, "")); n == 0 {
				t.Errorf("%s: no rows compared", tbl)
			}
		}
	})
}

// matches reports whether line holds every one of frags.
func matches(line string, frags []string) bool {
	for _, f := range frags {
		if !strings.Contains(line, f) {
			return false
		}
	}
	return true
}
