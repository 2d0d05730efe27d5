package bench

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/walapply/walapply/testenv"
)

// TestRunbookSmoke runs issue 20's whole path (runbook.go) at 1% of the
// benchmark's size: a PostgreSQL 15 source written to by pgbench into an
// empty target of the newest selected version (18 by default), every
// phase timed, compare equal, the sequence set, and the report names
// every figure.
func TestRunbookSmoke(t *testing.T) {
	testenv.SkipShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	versions, err := testenv.Versions()
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Runbook(ctx, RunbookOptions{Scale: 0.01, Rate: 50, TargetVersion: versions[len(versions)-1],
		Timeout: 7 * time.Minute, Log: zerolog.NewTestWriter(t)})
	var md strings.Builder
	if rep != nil {
		if werr := rep.WriteMarkdown(&md); werr != nil {
			t.Fatal(werr)
		}
		t.Logf("\n%s", md.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Phases) != 5 {
		t.Fatalf("%d phases, want 5 (copy and follow, stop writes, cut-over, compare, sequences)", len(rep.Phases))
	}
	for _, p := range rep.Phases {
		if p.Duration <= 0 {
			t.Errorf("phase %q: no time", p.Name)
		}
	}
	// The source wrote during the copy, and the applier's own CPU was
	// measured where it ran.
	if rep.Writes <= 0 || rep.WriteRate() <= 0 {
		t.Errorf("%d writes at %.1f/s: the source was not written to", rep.Writes, rep.WriteRate())
	}
	if rep.Phases[0].CPU.Walapply <= 0 || rep.Phases[0].CPU.Source <= 0 || rep.Phases[0].CPU.Target <= 0 {
		t.Errorf("copy and follow: CPU %v, a figure is missing", rep.Phases[0].CPU)
	}
	if rep.CopyDone <= 0 || rep.CopyDone > rep.Phases[0].Duration || rep.SourceBytes <= 0 || rep.SourceRows <= 0 {
		t.Errorf("copy done after %v of %v, %d bytes, %d rows: a figure is missing", rep.CopyDone, rep.Phases[0].Duration, rep.SourceBytes, rep.SourceRows)
	}
	if rep.PeakRSS <= 0 {
		t.Error("no peak RSS")
	}
	if !strings.HasPrefix(rep.Reached, "reached ") || !strings.Contains(rep.Compare, "5 tables: 5 equal, 0 different") ||
		!strings.Contains(rep.Sequences, "sequence(s) set") {
		t.Errorf("cut-over %q, compare %q, sequences %q", rep.Reached, rep.Compare, rep.Sequences)
	}
	if rep.Verified.Tables != 5 {
		t.Errorf("the row-by-row check covered %d tables, want 5", rep.Verified.Tables)
	}
	for _, want := range []string{"| copy and follow", "| cut-over", "| compare", "| sequences", "MB/s", "peak RSS", "transactions in"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("the report has no %q", want)
		}
	}
}

// TestRunbookCompareFails: a target that differs from the source fails
// the runbook's compare step with ErrCompare, and the report says so.
func TestRunbookCompareFails(t *testing.T) {
	testenv.SkipShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	source, target, err := startPair(ctx, schemaSourceVersion, 18, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer source.Close()
	defer target.Close()
	dir := t.TempDir()
	mod, err := moduleDir(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := buildWalapply(ctx, mod, dir)
	if err != nil {
		t.Fatal(err)
	}
	r := &runEnv{db: benchDB, source: source, target: target, dir: dir}
	for i, c := range []*testenv.Cluster{source, target} {
		if err := c.CreateDatabase(ctx, benchDB); err != nil {
			t.Fatal(err)
		}
		if err := r.exec(ctx, c, `CREATE TABLE t (id int PRIMARY KEY, v text)`,
			`INSERT INTO t SELECT g, 'v' FROM generate_series(1, 100) g`); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			if err := r.exec(ctx, c, `UPDATE t SET v = 'changed' WHERE id = 7`); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := r.exec(ctx, source, `CREATE PUBLICATION `+runbookPublication+` FOR ALL TABLES`); err != nil {
		t.Fatal(err)
	}
	e := &runbookEnv{opts: RunbookOptions{CopyWorkers: 2}.withDefaults(), r: r, bin: bin, rep: &RunbookReport{},
		source: source.ConnString(benchDB), target: target.ConnString(benchDB), logf: t.Logf}
	err = e.compare(ctx)
	if !errors.Is(err, ErrCompare) || !e.rep.CompareFailed {
		t.Fatalf("compare of different tables: %v (failed %t), want ErrCompare", err, e.rep.CompareFailed)
	}
	var md strings.Builder
	if err := e.rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "COMPARE FOUND SOURCE AND TARGET DIFFERENT") || !strings.Contains(md.String(), "0 equal, 1 different") {
		t.Errorf("the report does not say compare failed:\n%s", md.String())
	}
}
