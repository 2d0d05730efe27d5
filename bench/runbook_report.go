package bench

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// RunbookReport is what Runbook measured (runbook.go).
type RunbookReport struct {
	Options           RunbookOptions
	Git               GitState
	Started, Finished time.Time
	// LoadStart and LoadEnd are /proc/loadavg at the start and the end.
	LoadStart, LoadEnd           string
	SourceVersion, TargetVersion int
	// Tables, SourceRows and SourceBytes are what the source held before
	// the writes started (SourceBytes: pg_table_size, heap and TOAST, no
	// indexes); Fill is how long filling it took (not timed as a phase).
	Tables      int
	SourceRows  int64
	SourceBytes int64
	Fill        time.Duration
	// Writes are pgbench's transactions committed during the run, in
	// WriteTime.
	Writes    int64
	WriteTime time.Duration
	// CopyDone is the time from walapply run's start to the end of its
	// initial copy (pre-data, the copy, post-data), as status reports it.
	CopyDone time.Duration
	CaughtUp caughtUp
	Phases   []RunbookPhase
	// PeakRSS is walapply run's peak resident set.
	PeakRSS int64
	// Reached, Compare and Sequences are the last lines of the cut-over,
	// compare and sequences.
	Reached, Compare, Sequences string
	// CompareFailed says compare did not find the two sides equal.
	CompareFailed bool
	// Verified is bench's own row-by-row check after the last phase.
	Verified Verification
}

// RunbookPhase is one timed step of the runbook.
type RunbookPhase struct {
	Name     string
	Duration time.Duration
	// CPU is what the clusters and walapply spent in the phase.
	CPU CPU

	start    time.Time
	cpuStart cpuSnapshot
	cpuErr   error
}

// WriteRate is pgbench's committed transactions per second.
func (r *RunbookReport) WriteRate() float64 {
	if r.WriteTime <= 0 {
		return 0
	}
	return float64(r.Writes) / r.WriteTime.Seconds()
}

// WriteMarkdown writes the report as Markdown, for BENCHMARKS.md.
func (r *RunbookReport) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	o := r.Options
	fmt.Fprintf(&b, "Issue 20's whole path, PostgreSQL %d → %d (bench/runbook.go), %s–%s UTC",
		r.SourceVersion, r.TargetVersion, r.Started.Format("2006-01-02 15:04"), r.Finished.Format("15:04"))
	fmt.Fprintf(&b, ", commit `%s`", shortCommit(r.Git))
	fmt.Fprintf(&b, "; load average %s at the start, %s at the end.\n\n", r.LoadStart, r.LoadEnd)
	if o.Command != "" {
		fmt.Fprintf(&b, "`%s`\n\n", o.Command)
	}
	fmt.Fprintf(&b, "- source: PostgreSQL %d, the migrate workload at scale %g: %d tables, %s (pg_table_size), %d rows (filled in %s, not timed); target: PostgreSQL %d, empty\n",
		r.SourceVersion, o.Scale, r.Tables, formatBytes(r.SourceBytes), r.SourceRows, round(r.Fill), r.TargetVersion)
	fmt.Fprintf(&b, "- writes during copy and follow: `pgbench -N -c %d -R %d`: %d transactions in %.1f s (%.1f/s)\n",
		o.Clients, o.Rate, r.Writes, r.WriteTime.Seconds(), r.WriteRate())
	fmt.Fprintf(&b, "- walapply: `run --copy --create-slot --schema --copy-workers %d --index-workers %d`, then SIGUSR1, `compare --jobs %d`, `sequences`\n\n",
		o.CopyWorkers, o.CopyWorkers, o.CopyWorkers)
	b.WriteString("| phase | time | CPU s: source | target | walapply |\n|---|---|---|---|---|\n")
	var total RunbookPhase
	for _, p := range r.Phases {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", p.Name, formatSeconds(p.Duration), phaseCPU(p.CPU))
		total.Duration += p.Duration
		total.CPU.Source += p.CPU.Source
		total.CPU.Target += p.CPU.Target
		total.CPU.Walapply += p.CPU.Walapply
	}
	fmt.Fprintf(&b, "| **total** | **%s** | %s |\n\n", formatSeconds(total.Duration), phaseCPU(total.CPU))
	if r.CopyDone > 0 {
		fmt.Fprintf(&b, "- initial copy (pre-data, copy, post-data; from the run's start to status's `finished_at`): %s, %s\n",
			formatSeconds(r.CopyDone), copyRates(r.SourceBytes, r.SourceRows, r.CopyDone, CPU{}))
		fmt.Fprintf(&b, "- caught up: the origin past the source's position of the first status that saw the copy complete (%s, slot lag %d bytes then)\n",
			r.CaughtUp.mark, r.CaughtUp.lagBytes)
	}
	if r.PeakRSS > 0 {
		fmt.Fprintf(&b, "- walapply run's peak RSS: %s\n", formatBytes(r.PeakRSS))
	}
	for _, l := range []struct{ what, line string }{{"cut-over", r.Reached}, {"compare", r.Compare}, {"sequences", r.Sequences}} {
		if l.line != "" {
			fmt.Fprintf(&b, "- %s: `%s`\n", l.what, l.line)
		}
	}
	if r.CompareFailed {
		b.WriteString("- **COMPARE FOUND SOURCE AND TARGET DIFFERENT**\n")
	}
	if r.Verified.Tables > 0 {
		fmt.Fprintf(&b, "- bench's row-by-row check afterwards: %d tables, %d rows identical\n", r.Verified.Tables, r.Verified.Rows)
	}
	b.WriteString("- CPU: of every process of each cluster (the source's includes pgbench's backends and both include `status`'s polls, twice a second) and of the walapply process of the phase\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// phaseCPU prints a phase's CPU seconds as three table cells.
func phaseCPU(c CPU) string {
	return fmt.Sprintf("%.2f | %.2f | %.2f", c.Source.Seconds(), c.Target.Seconds(), c.Walapply.Seconds())
}

// shortCommit is the measured commit, abbreviated, "+dirty" when the
// working tree differed from it.
func shortCommit(g GitState) string {
	c := g.Head
	if len(c) > 7 {
		c = c[:7]
	}
	if g.Dirty {
		c += "+dirty"
	}
	return c
}
