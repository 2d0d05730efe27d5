package bench

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrOptions reports options the harness cannot run with.
var ErrOptions = errors.New("bench: invalid options")

// Applier names one of the two appliers compared.
type Applier string

// The appliers compared side by side.
const (
	Builtin  Applier = "builtin"
	Walapply Applier = "walapply"
)

// Options configures Run.
type Options struct {
	// Workloads to run, in this order (see WorkloadNames); empty means all.
	Workloads []string
	// Versions are PostgreSQL major versions (15–18); empty means 15 and 18.
	Versions []int
	// Appliers to run, alternating; empty means both. Running one alone is
	// for quick trials: the report then has no ratio.
	Appliers []Applier
	// Runs per applier, workload and version; 0 means 3.
	Runs int
	// Scale multiplies every workload's size (1 is the size; 0.01
	// is a smoke run); 0 means 1.
	Scale float64
	// WalapplyFlags are appended to every `walapply run` command line, so
	// they override the harness's own flags.
	WalapplyFlags []string
	// WalapplyBin is a prebuilt walapply binary; empty builds ./cmd/walapply
	// of the module in ModuleDir once per Run.
	WalapplyBin string
	// WalapplyRev, if set, builds walapply as committed at this revision
	// (from `git archive`, leaving the working tree alone) instead of
	// from the working tree; the report then names that commit.
	WalapplyRev string
	// ModuleDir is the walapply module's root; empty finds it with
	// `go env GOMOD` from the working directory.
	ModuleDir string
	// DrainTimeout bounds one applier's drain; 0 means 20 minutes.
	DrainTimeout time.Duration
	// Neighbour is the number of CPU-bound processes run beside every
	// timed drain (neighbour.go); 0 runs none.
	Neighbour int
	// CopyWorkers is how many tables the copy workload copies at once,
	// for both appliers; 0 means 2 (both appliers' default).
	CopyWorkers int
	// CopySchema runs the initial-copy workloads into a target without
	// any table, the schema's creation timed with the copy: walapply
	// with --schema, the built-in subscriber after pg_dump --schema-only
	// restored with psql (migrate.go). The source is then PostgreSQL 15
	// (the only pg_dump there is) and Versions are the targets'.
	CopySchema bool
	// KeepLogs, if set, is a directory that receives walapply's log of
	// every drain.
	KeepLogs string
	// Streaming is how both appliers take the streamed workloads (bulk):
	// "on" (spilled, then applied at the commit: walapply --streaming on,
	// the subscription's streaming = on) or "parallel" (applied as they
	// stream: --streaming parallel, streaming = parallel, PostgreSQL 16+);
	// empty means on.
	Streaming string
	// Command is recorded in the report as the command that produced it.
	Command string
	// Log receives one progress line per step; nil discards them.
	Log io.Writer
}

func (o Options) withDefaults() (Options, error) {
	if len(o.Workloads) == 0 {
		o.Workloads = WorkloadNames()
	}
	for _, w := range o.Workloads {
		if _, ok := lookupWorkload(w); !ok {
			return o, fmt.Errorf("%w: unknown workload %q (known: %s)", ErrOptions, w, strings.Join(allWorkloadNames(), ", "))
		}
	}
	if len(o.Versions) == 0 {
		o.Versions = []int{15, 18}
	}
	for _, v := range o.Versions {
		if v < 15 || v > 18 {
			return o, fmt.Errorf("%w: PostgreSQL %d: the harness runs on 15–18", ErrOptions, v)
		}
	}
	if len(o.Appliers) == 0 {
		o.Appliers = []Applier{Builtin, Walapply}
	}
	for _, a := range o.Appliers {
		if a != Builtin && a != Walapply {
			return o, fmt.Errorf("%w: unknown applier %q (known: %s, %s)", ErrOptions, a, Builtin, Walapply)
		}
	}
	if o.Runs == 0 {
		o.Runs = 3
	}
	if o.Runs < 0 {
		return o, fmt.Errorf("%w: runs %d", ErrOptions, o.Runs)
	}
	if o.Scale == 0 {
		o.Scale = 1
	}
	if o.Scale < 0 || math.IsNaN(o.Scale) || math.IsInf(o.Scale, 0) {
		return o, fmt.Errorf("%w: scale %v", ErrOptions, o.Scale)
	}
	if o.Neighbour < 0 {
		return o, fmt.Errorf("%w: neighbour %d", ErrOptions, o.Neighbour)
	}
	if o.CopyWorkers == 0 {
		o.CopyWorkers = 2
	}
	if o.CopyWorkers < 0 {
		return o, fmt.Errorf("%w: copy workers %d", ErrOptions, o.CopyWorkers)
	}
	if o.DrainTimeout == 0 {
		o.DrainTimeout = 20 * time.Minute
	}
	switch o.Streaming {
	case "":
		o.Streaming = "on"
	case "on":
	case "parallel":
		for _, v := range o.Versions {
			if v < 16 {
				return o, fmt.Errorf("%w: streaming parallel needs PostgreSQL 16 or later, not %d", ErrOptions, v)
			}
		}
	default:
		return o, fmt.Errorf("%w: streaming %q (known: on, parallel)", ErrOptions, o.Streaming)
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	return o, nil
}

// ParseList splits a comma-separated list, dropping blanks.
func ParseList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// ParseVersions parses a comma-separated list of major versions such as
// "15,18".
func ParseVersions(s string) ([]int, error) {
	var out []int
	for _, p := range ParseList(s) {
		v, err := strconv.Atoi(p)
		if err != nil {
			return nil, fmt.Errorf("%w: version %q is not a number", ErrOptions, p)
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out, nil
}

// scaled returns base×scale rounded, at least min.
func scaled(base int, scale float64, min int) int {
	n := int(math.Round(float64(base) * scale))
	return max(n, min)
}
