package apply_test

import (
	"context"
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/walapply/walapply/testenv"
)

// indexSortBegin and indexSortEnd match trace_sort's first line for a
// unique index build's sort run by a walapply post-data connection (with
// the kB it may use) and the last line of any of its sorts: internal (in
// memory) or external (on disk).
var (
	indexSortBegin = regexp.MustCompile(`app=walapply \S+ schema: LOG:  begin index sort: unique = t, workMem = (\d+)`)
	indexSortEnd   = regexp.MustCompile(`app=walapply \S+ schema: LOG:  (internal|external) sort (of worker -1 )?ended`)
)

// TestCopySchemaIndexMemory: the post-data section's index builds run
// with --index-memory's maintenance_work_mem when the target's own is
// lower. The target's is 1 MB (its minimum), too little for the sort of
// a 60,000-row primary key: with the default 256 MB the builds sort in
// memory, with --index-memory off on disk, as the target's setting says.
func TestCopySchemaIndexMemory(t *testing.T) {
	t.Parallel()
	versions, err := testenv.Versions()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(versions, schemaSourceVersion) {
		t.Skipf("--schema is tested with PostgreSQL %d sources only (the only pg_dump here); WALAPPLY_TEST_PG=%v has none", schemaSourceVersion, versions)
	}
	target := slices.Max(versions) // into the newest selected (15 or later)
	for _, c := range []struct {
		name    string
		memory  int64
		wantKB  string
		spilled bool
	}{
		{"default", 0, "262144", false},
		{"off", -1, "1024", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := &harness{t: t, ctx: context.Background(), pair: &testenv.Pair{
				Source: testenv.NewCluster(t, testenv.Options{Version: schemaSourceVersion}),
				Target: testenv.NewCluster(t, testenv.Options{Version: target, Settings: map[string]string{
					"maintenance_work_mem": "1MB",
					"trace_sort":           "on",
					"log_line_prefix":      "%m [%p] app=%a: ",
				}}),
			}}
			h.source(`CREATE TABLE big (id int PRIMARY KEY, v int NOT NULL)`,
				`INSERT INTO big SELECT g, g % 1000 FROM generate_series(1, 60000) g`,
				`CREATE PUBLICATION mpub FOR TABLE big`)
			cfg := h.config("mslot", "mpub")
			cfg.Copy, cfg.Schema, cfg.IndexMemory = true, true, c.memory
			stop := h.runApplier(cfg)
			h.waitCopyDone(2*time.Minute, nil)
			if err := stop(); err != nil && !errors.Is(err, context.Canceled) {
				t.Fatal(err)
			}
			h.expect(`SELECT indexname FROM pg_indexes WHERE tablename = 'big'`, "big_pkey")
			b, err := os.ReadFile(h.pair.Target.LogPath())
			if err != nil {
				t.Fatal(err)
			}
			var workMem, sorts []string
			for _, line := range strings.Split(string(b), "\n") {
				if m := indexSortBegin.FindStringSubmatch(line); m != nil {
					workMem = append(workMem, m[1])
				}
				if m := indexSortEnd.FindStringSubmatch(line); m != nil {
					sorts = append(sorts, m[1])
				}
			}
			if len(workMem) != 1 || workMem[0] != c.wantKB {
				t.Errorf("the post-data connection's unique index sorts had workMem %v kB: want [%s]", workMem, c.wantKB)
			}
			// A unique index build also sorts the dead tuples it meets
			// (in work_mem; none here): an internal sort besides the
			// keys', whatever maintenance_work_mem is.
			if !slices.Contains(sorts, "internal") || slices.Contains(sorts, "external") != c.spilled {
				t.Errorf("the post-data connection's sorts were %v: want the keys' sorted on disk %v", sorts, c.spilled)
			}
		})
	}
}
