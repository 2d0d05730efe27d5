package bench_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/walapply/walapply/bench"
	"github.com/walapply/walapply/testenv"
)

// TestBenchSmoke runs the whole harness at 1% of every workload (the
// initial copy included), one run per applier, on the newest selected PostgreSQL version: the walapply
// binary built from this module must drain every backlog, and after every
// drain source and target must have been compared and found identical.
func TestBenchSmoke(t *testing.T) {
	testenv.SkipShort(t)
	versions, err := testenv.Versions()
	if err != nil {
		t.Fatal(err)
	}
	version := versions[len(versions)-1]
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := bench.Run(ctx, bench.Options{
		Versions:     []int{version},
		Runs:         1,
		Scale:        0.01,
		DrainTimeout: time.Minute,
		Log:          zerolog.NewTestWriter(t), // the harness's progress lines, in the test log
	})
	if err != nil {
		t.Fatal(err)
	}
	names := bench.WorkloadNames()
	if got, want := len(rep.Results), 2*len(names); got != want {
		t.Fatalf("%d results, want %d (one per workload and applier)", got, want)
	}
	seen := map[string]bool{}
	for _, res := range rep.Results {
		what := res.Workload + " " + string(res.Applier)
		seen[what] = true
		if res.Err != nil {
			t.Errorf("%s: %v", what, res.Err)
			continue
		}
		// Every workload has its own tables plus the marker table, and
		// rows in them: the comparison must have covered them.
		if res.Verified.Tables < 2 || res.Verified.Rows < 2 {
			t.Errorf("%s: verification covered %d tables, %d rows", what, res.Verified.Tables, res.Verified.Rows)
		}
		switch {
		case res.Workload == "copy":
			// The initial copy: no backlog to decode, the tables' size
			// instead.
			if res.Drain <= 0 || res.CopyBytes <= 0 {
				t.Errorf("%s: drain %v of %d bytes: a figure is missing", what, res.Drain, res.CopyBytes)
			}
		case res.Drain <= 0 || res.Decode <= 0 || res.Messages <= 0:
			t.Errorf("%s: drain %v, decode %v over %d messages: a figure is missing", what, res.Drain, res.Decode, res.Messages)
		}
		if res.Applier == bench.Walapply && res.PeakRSS <= 0 {
			t.Errorf("%s: no peak RSS recorded", what)
		}
	}
	for _, n := range names {
		for _, a := range []bench.Applier{bench.Builtin, bench.Walapply} {
			if !seen[n+" "+string(a)] {
				t.Errorf("no %s run of %s", a, n)
			}
		}
	}
	var md strings.Builder
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, s := range rep.Summaries() {
		if s.Ratio() <= 0 {
			t.Errorf("%s: no walapply/builtin ratio", s.Workload)
		}
		if !strings.Contains(md.String(), "| "+s.Workload+" | ") {
			t.Errorf("the Markdown report has no row for %s:\n%s", s.Workload, md.String())
		}
	}
	t.Logf("\n%s", md.String())
}
