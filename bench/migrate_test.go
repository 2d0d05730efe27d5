package bench_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/walapply/walapply/bench"
	"github.com/walapply/walapply/testenv"
)

// TestBenchMigrateSchema runs the migrate workload (issue 20's initial
// copy, at a tiny scale) with CopySchema, a PostgreSQL 15 source into the
// newest selected target: both appliers must create the schema, copy every
// table and leave the target identical to the source; the workload is not
// among the defaults.
func TestBenchMigrateSchema(t *testing.T) {
	testenv.SkipShort(t)
	versions, err := testenv.Versions()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(versions, 15) {
		t.Skip("needs PostgreSQL 15 (the only pg_dump) among WALAPPLY_TEST_PG")
	}
	if slices.Contains(bench.WorkloadNames(), "migrate") {
		t.Error("migrate is among the default workloads; it runs only when named")
	}
	version := versions[len(versions)-1]
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := bench.Run(ctx, bench.Options{
		Workloads:    []string{"migrate"},
		Versions:     []int{version},
		Runs:         1,
		Scale:        0.005,
		CopySchema:   true,
		DrainTimeout: 2 * time.Minute,
		Log:          zerolog.NewTestWriter(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 2 {
		t.Fatalf("%d results, want 2", len(rep.Results))
	}
	for _, res := range rep.Results {
		if res.Err != nil {
			t.Errorf("%s: %v", res.Applier, res.Err)
			continue
		}
		// pgbench's four tables, the wide one and the marker.
		if res.Verified.Tables != 6 || res.Verified.Rows < 100000 || res.CopyBytes <= 0 || res.Drain <= 0 {
			t.Errorf("%s: verified %d tables, %d rows; copied %d bytes in %v", res.Applier, res.Verified.Tables, res.Verified.Rows, res.CopyBytes, res.Drain)
		}
		if !strings.Contains(res.Note, "source PostgreSQL 15") {
			t.Errorf("%s: note %q does not say the source was PostgreSQL 15", res.Applier, res.Note)
		}
	}
}
