package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is the outcome of Run: every run's result and what produced it.
type Report struct {
	Options           Options
	Git               GitState
	Started, Finished time.Time
	// LoadStart and LoadEnd are /proc/loadavg at the start and the end:
	// other work on the machine skews the figures.
	LoadStart, LoadEnd string
	Results            []RunResult
}

// loadAvg returns the 1, 5 and 15 minute load averages, or "unknown".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// GitState identifies the code measured.
type GitState struct {
	Head  string // commit, or "unknown"
	Dirty bool   // tracked files differ from Head
	// Revision says walapply was built from commit Head alone
	// (Options.WalapplyRev), whatever the working tree held.
	Revision bool
}

// gitState reads HEAD and whether tracked files were modified, without
// touching the repository (no index refresh).
func gitState(ctx context.Context, dir string) GitState {
	g := GitState{Head: "unknown"}
	if dir == "" {
		return g
	}
	out, err := exec.CommandContext(ctx, "git", "-C", dir, "rev-parse", "HEAD").Output()
	if err != nil {
		return g
	}
	g.Head = strings.TrimSpace(string(out))
	out, err = exec.CommandContext(ctx, "git", "--no-optional-locks", "-C", dir, "status", "--porcelain", "--untracked-files=no").Output()
	g.Dirty = err == nil && len(strings.TrimSpace(string(out))) > 0
	return g
}

// Failed returns the runs that failed.
func (r *Report) Failed() []RunResult {
	var out []RunResult
	for _, res := range r.Results {
		if res.Err != nil {
			out = append(out, res)
		}
	}
	return out
}

// Summary condenses the runs of one workload on one version.
type Summary struct {
	Workload string
	Version  int
	// Builtin and Walapply are the drain times of the successful runs.
	Builtin, Walapply Stats
	// BuiltinFailed and WalapplyFailed count failed runs.
	BuiltinFailed, WalapplyFailed int
	// Decode is the decode ceiling over all runs.
	Decode   Stats
	Messages int64
	// PeakRSS is the largest walapply peak RSS of any run, in bytes.
	PeakRSS int64
	// BuiltinCPU and WalapplyCPU are the median CPU times of a drain.
	BuiltinCPU, WalapplyCPU CPU
	Notes                   []string
	// CopyBytes and CopyRows are what the copy workload copied (0 for
	// the others).
	CopyBytes, CopyRows int64
	// LoadMin and LoadMax bound the 1-minute load average at the ends of
	// the drains.
	LoadMin, LoadMax float64
}

// Ratio is walapply's median over builtin's (below 1: walapply is faster);
// 0 when either has no successful run.
func (s Summary) Ratio() float64 {
	if s.Builtin.N == 0 || s.Walapply.N == 0 || s.Builtin.Median == 0 {
		return 0
	}
	return float64(s.Walapply.Median) / float64(s.Builtin.Median)
}

// Stats are the median, minimum and maximum of N durations.
type Stats struct {
	N                int
	Median, Min, Max time.Duration
}

// statsOf summarises ds; the median of an even count is the mean of the
// middle two.
func statsOf(ds []time.Duration) Stats {
	if len(ds) == 0 {
		return Stats{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	n := len(s)
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return Stats{N: n, Median: med, Min: s[0], Max: s[n-1]}
}

// Summaries groups the results by workload and version, in run order.
func (r *Report) Summaries() []Summary {
	type key struct {
		w string
		v int
	}
	var order []key
	groups := map[key][]RunResult{}
	for _, res := range r.Results {
		k := key{res.Workload, res.Version}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], res)
	}
	out := make([]Summary, 0, len(order))
	for _, k := range order {
		s := Summary{Workload: k.w, Version: k.v}
		var b, w, dec []time.Duration
		var bc, wc []CPU
		for _, res := range groups[k] {
			if res.Decode > 0 {
				dec = append(dec, res.Decode)
				s.Messages = res.Messages
			}
			if res.Err == nil {
				if res.CopyBytes > 0 {
					s.CopyBytes, s.CopyRows = res.CopyBytes, res.Verified.Rows
				}
				if s.LoadMax == 0 || res.Load < s.LoadMin {
					s.LoadMin = res.Load
				}
				s.LoadMax = max(s.LoadMax, res.Load)
			}
			if res.Note != "" && !slices.Contains(s.Notes, res.Note) {
				s.Notes = append(s.Notes, res.Note)
			}
			switch {
			case res.Applier == Builtin && res.Err != nil:
				s.BuiltinFailed++
			case res.Applier == Builtin:
				b = append(b, res.Drain)
				bc = append(bc, res.CPU)
			case res.Err != nil:
				s.WalapplyFailed++
			default:
				w = append(w, res.Drain)
				wc = append(wc, res.CPU)
				s.PeakRSS = max(s.PeakRSS, res.PeakRSS)
			}
		}
		s.Builtin, s.Walapply, s.Decode = statsOf(b), statsOf(w), statsOf(dec)
		s.BuiltinCPU, s.WalapplyCPU = cpuMedians(bc), cpuMedians(wc)
		out = append(out, s)
	}
	return out
}

// formatSeconds prints a duration in seconds with two decimals.
func formatSeconds(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// formatStats prints "median (min–max)", the failures and "–" when
// nothing succeeded.
func formatStats(s Stats, failed int) string {
	var out string
	switch s.N {
	case 0:
		out = "–"
	case 1:
		out = formatSeconds(s.Median)
	default:
		out = fmt.Sprintf("%s (%.2f–%.2f)", formatSeconds(s.Median), s.Min.Seconds(), s.Max.Seconds())
	}
	if failed > 0 {
		out += fmt.Sprintf(" [%d FAILED]", failed)
	}
	return out
}

func formatRatio(r float64) string {
	if r == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", r)
}

// formatCount prints a count, "–" for none (the copy workload decodes no
// messages).
func formatCount(n int64) string {
	if n == 0 {
		return "–"
	}
	return fmt.Sprint(n)
}

// formatBytes prints a size in MiB.
func formatBytes(n int64) string {
	if n <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

var columns = []string{"workload", "PG", "builtin median (min–max)", "walapply median (min–max)", "walapply/builtin", "decode ceiling", "walapply peak RSS", "CPU s: source+target(+walapply)", "TCP segments", "messages"}

func (s Summary) cells() []string {
	return []string{s.Workload, fmt.Sprint(s.Version), formatStats(s.Builtin, s.BuiltinFailed),
		formatStats(s.Walapply, s.WalapplyFailed), formatRatio(s.Ratio()), formatStats(s.Decode, 0),
		formatBytes(s.PeakRSS), formatCPU(s.BuiltinCPU, s.WalapplyCPU, s.Builtin.N, s.Walapply.N),
		formatSegments(s.BuiltinCPU, s.WalapplyCPU, s.Builtin.N, s.Walapply.N), formatCount(s.Messages)}
}

// WriteText prints the summary table aligned for a terminal, then the
// failures.
func (r *Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(columns, "\t"))
	for _, s := range r.Summaries() {
		fmt.Fprintln(tw, strings.Join(s.cells(), "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	r.writeNotes(w, "")
	return nil
}

// WriteMarkdown writes the report as a Markdown section: when, what code,
// the command, the table, notes and failures.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "### %s\n\n", r.Started.Format("2006-01-02 15:04 UTC"))
	switch {
	case r.Git.Revision:
		fmt.Fprintf(&b, "- code: walapply built from commit `%s` (git archive, not the working tree)\n", r.Git.Head)
	case r.Options.WalapplyBin != "":
		fmt.Fprintf(&b, "- code: walapply binary %s given; repository at git HEAD `%s`, dirty: %v\n", r.Options.WalapplyBin, r.Git.Head, r.Git.Dirty)
	case r.Git.Dirty:
		fmt.Fprintf(&b, "- code: git HEAD `%s` with uncommitted changes to tracked files\n", r.Git.Head)
	default:
		fmt.Fprintf(&b, "- code: git HEAD `%s`\n", r.Git.Head)
	}
	if r.Options.Command != "" {
		fmt.Fprintf(&b, "- command: `%s`\n", r.Options.Command)
	}
	fmt.Fprintf(&b, "- machine: %d CPUs, %s/%s, %s; load average %s at the start, %s at the end\n",
		runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(), r.LoadStart, r.LoadEnd)
	fmt.Fprintf(&b, "- %d run(s) per applier, scale %g, took %s\n", r.Options.Runs, r.Options.Scale,
		r.Finished.Sub(r.Started).Round(time.Second))
	if r.Options.Neighbour > 0 {
		fmt.Fprintf(&b, "- neighbour load: %d busy processes beside every timed drain, both appliers\n", r.Options.Neighbour)
	} else {
		b.WriteString("- neighbour load: none\n")
	}
	b.WriteString("\n")
	b.WriteString("| " + strings.Join(columns, " | ") + " |\n")
	b.WriteString(strings.Repeat("|---", len(columns)) + "|\n")
	for _, s := range r.Summaries() {
		b.WriteString("| " + strings.Join(s.cells(), " | ") + " |\n")
	}
	b.WriteString("\n")
	r.writeNotes(&b, "- ")
	_, err := io.WriteString(w, b.String())
	return err
}

// writeNotes lists the workloads' descriptions, notes and failures.
func (r *Report) writeNotes(w io.Writer, bullet string) {
	fmt.Fprintf(w, "\n%sworkloads at scale %g:\n", bullet, r.Options.Scale)
	for _, name := range r.Options.Workloads {
		wl, _ := lookupWorkload(name)
		fmt.Fprintf(w, "  %s%s: %s\n", bullet, name, wl.describe(r.Options.Scale))
	}
	for _, s := range r.Summaries() {
		if s.LoadMax > 0 {
			fmt.Fprintf(w, "%s%s PG%d: load average (1 min) at the drains' ends %.2f–%.2f\n", bullet, s.Workload, s.Version, s.LoadMin, s.LoadMax)
		}
		if s.CopyBytes > 0 {
			fmt.Fprintf(w, "%s%s PG%d: %s of tables, %d rows; builtin %s; walapply %s\n", bullet, s.Workload, s.Version,
				formatBytes(s.CopyBytes), s.CopyRows, copyRates(s.CopyBytes, s.CopyRows, s.Builtin.Median, s.BuiltinCPU),
				copyRates(s.CopyBytes, s.CopyRows, s.Walapply.Median, s.WalapplyCPU))
		}
		for _, n := range s.Notes {
			fmt.Fprintf(w, "%s%s PG%d: %s\n", bullet, s.Workload, s.Version, n)
		}
	}
	for _, f := range r.Failed() {
		fmt.Fprintf(w, "%sFAILED: %s PG%d run %d %s: %s\n", bullet, f.Workload, f.Version, f.Run, f.Applier,
			strings.ReplaceAll(f.Err.Error(), "\n", " | "))
	}
}
