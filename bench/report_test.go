package bench

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestStatsOf(t *testing.T) {
	s := time.Second
	cases := []struct {
		in   []time.Duration
		want Stats
	}{
		{nil, Stats{}},
		{[]time.Duration{3 * s}, Stats{1, 3 * s, 3 * s, 3 * s}},
		{[]time.Duration{5 * s, 1 * s, 3 * s}, Stats{3, 3 * s, 1 * s, 5 * s}},
		{[]time.Duration{4 * s, 1 * s, 2 * s, 9 * s}, Stats{4, 3 * s, 1 * s, 9 * s}},
	}
	for _, c := range cases {
		if got := statsOf(c.in); got != c.want {
			t.Errorf("statsOf(%v) = %+v, want %+v", c.in, got, c.want)
		}
	}
}

func TestSummaries(t *testing.T) {
	s := time.Second
	rep := &Report{Options: Options{Workloads: []string{"small", "bulk"}, Runs: 2, Scale: 1}, Results: []RunResult{
		{Workload: "small", Version: 18, Applier: Builtin, Run: 1, Drain: 2 * s, Decode: s / 2, Messages: 7, CPU: CPU{Source: s, Target: 2 * s, Segments: 2000}},
		{Workload: "small", Version: 18, Applier: Walapply, Run: 1, Drain: 1 * s, Decode: s / 2, Messages: 7, PeakRSS: 30 << 20, CPU: CPU{Source: s, Target: s, Walapply: s / 2, Segments: 150000}},
		{Workload: "small", Version: 18, Applier: Walapply, Run: 2, Drain: 3 * s, Decode: s, Messages: 7, PeakRSS: 40 << 20, CPU: CPU{Source: 2 * s, Target: s, Walapply: s / 2, Segments: 1000}},
		{Workload: "small", Version: 18, Applier: Builtin, Run: 2, Drain: 4 * s, Decode: s, Messages: 7, CPU: CPU{Source: s, Target: 4 * s, Segments: 4000}},
		{Workload: "bulk", Version: 18, Applier: Builtin, Run: 1, Drain: 10 * s, Decode: s},
		{Workload: "bulk", Version: 18, Applier: Walapply, Run: 1, Err: errors.New("boom"), Note: "streaming off"},
	}}
	sums := rep.Summaries()
	if len(sums) != 2 {
		t.Fatalf("%d summaries, want 2", len(sums))
	}
	small, bulk := sums[0], sums[1]
	if small.Builtin.Median != 3*s || small.Walapply.Median != 2*s || small.PeakRSS != 40<<20 || small.Messages != 7 {
		t.Errorf("small: %+v", small)
	}
	if r := small.Ratio(); r < 0.666 || r > 0.667 {
		t.Errorf("small ratio %v, want 2/3", r)
	}
	if bulk.WalapplyFailed != 1 || bulk.Walapply.N != 0 || bulk.Ratio() != 0 || len(bulk.Notes) != 1 {
		t.Errorf("bulk: %+v", bulk)
	}
	var md strings.Builder
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| small | 18 | 3.00 s (2.00–4.00) | 2.00 s (1.00–3.00) | 0.67 | 0.75 s (0.50–1.00) | 40.0 MiB | b 1.0+3.0 · w 1.5+1.0+0.5 | b 3k · w 76k | 7 |",
		"| bulk | 18 | 10.00 s | – [1 FAILED] | – |",
		"FAILED: bulk PG18 run 1 walapply: boom",
		"bulk PG18: streaming off",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md.String())
		}
	}
}

func TestMixedStatements(t *testing.T) {
	for i := range mixedTables {
		cols := mixedColumns(i)
		if len(cols) < 3 || len(cols) > 6 {
			t.Fatalf("table %d has %d columns", i, len(cols))
		}
		ins, upd, del := mixedStatements(i)
		if strings.Count(ins, "$2") < len(cols) || !strings.Contains(ins, "VALUES ($1, ") {
			t.Errorf("insert of table %d: %s", i, ins)
		}
		if !strings.HasSuffix(upd, "WHERE id = $1") || !strings.HasSuffix(del, "WHERE id = $1") {
			t.Errorf("update or delete of table %d: %s / %s", i, upd, del)
		}
	}
	// Every type occurs somewhere.
	used := map[string]bool{}
	for i := range mixedTables {
		for _, c := range mixedColumns(i) {
			used[c.sql] = true
		}
	}
	if len(used) != len(mixedTypes) {
		t.Errorf("%d of %d types used", len(used), len(mixedTypes))
	}
}

func TestScaled(t *testing.T) {
	cases := []struct {
		base  int
		scale float64
		min   int
		want  int
	}{
		{100000, 1, 4, 100000},
		{100000, 0.01, 4, 1000},
		{10, 0.01, 1, 1},
		{2000000, 0.5, 10, 1000000},
	}
	for _, c := range cases {
		if got := scaled(c.base, c.scale, c.min); got != c.want {
			t.Errorf("scaled(%d, %v, %d) = %d, want %d", c.base, c.scale, c.min, got, c.want)
		}
	}
	if got := pgbenchClients * pgbenchPerClient(1); got != 100000 {
		t.Errorf("pgbench at scale 1 runs %d transactions, want 100000", got)
	}
}

// TestCopySummary: the copy workload's rates and the drains' load
// averages are in the report, and its messages cell is empty.
func TestCopySummary(t *testing.T) {
	s := time.Second
	rep := &Report{Options: Options{Workloads: []string{"copy"}, Runs: 1, Scale: 1, Neighbour: 2}, Results: []RunResult{
		{Workload: "copy", Version: 18, Applier: Builtin, Run: 1, Drain: 4 * s, CopyBytes: 400e6, Verified: Verification{Tables: 3, Rows: 2e6}, Load: 3.5, CPU: CPU{Source: s, Target: 3 * s}},
		{Workload: "copy", Version: 18, Applier: Walapply, Run: 1, Drain: 2 * s, CopyBytes: 400e6, Verified: Verification{Tables: 3, Rows: 2e6}, Load: 4.25, CPU: CPU{Source: s, Target: 2 * s, Walapply: 2 * s}},
	}}
	var md strings.Builder
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| copy | 18 | 4.00 s | 2.00 s | 0.50 | – | – | b 1.0+3.0 · w 1.0+2.0+2.0 | b 0k · w 0k | – |",
		"- neighbour load: 2 busy processes beside every timed drain",
		"copy PG18: load average (1 min) at the drains' ends 3.50–4.25",
		"copy PG18: 381.5 MiB of tables, 2000000 rows; builtin 100.0 MB/s, 500k rows/s; walapply 200.0 MB/s, 1000k rows/s, walapply 5.0 ms CPU/MB",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, md.String())
		}
	}
}
