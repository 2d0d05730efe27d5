package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/walapply/walapply/testenv"
)

// Names shared by every run: the database, publication, slot and marker.
const (
	benchDB     = "bench"
	publication = "p"
	slotName    = "x"
	markerTable = "bench_marker"
)

// RunResult is one applier draining one backlog.
type RunResult struct {
	Workload string
	Version  int
	Applier  Applier
	Run      int // 1-based
	// Generate is how long the workload took on the source.
	Generate time.Duration
	// Decode is the source's decode ceiling: the time of
	// pg_logical_slot_peek_binary_changes over the whole backlog, which
	// returned Messages pgoutput messages.
	Decode   time.Duration
	Messages int64
	// Drain is the time from the applier's start to the marker row on the
	// target.
	Drain time.Duration
	// PeakRSS is walapply's peak resident set in bytes (0 for builtin).
	PeakRSS int64
	// CPU is what the clusters and walapply spent during the drain.
	CPU CPU
	// Verified says what the source/target comparison covered.
	Verified Verification
	// Note records how the run deviated from the plan (e.g. walapply ran
	// with --streaming off because it does not apply streamed
	// transactions yet).
	Note string
	// Err is why the run failed; a failed run has no Drain figure.
	Err error
	// CopyBytes is, for the copy workload, the size of the source's
	// tables (pg_table_size): what the drain copied.
	CopyBytes int64
	// Load is the 1-minute load average at the end of the drain, with
	// the neighbour load (Options.Neighbour) still running.
	Load float64
}

// runEnv is what one run's steps share.
type runEnv struct {
	version        int
	scale          float64
	source, target *testenv.Cluster
	db             string
	dir            string // scratch directory of the run
	// schema says the target starts without tables (Options.CopySchema).
	schema bool
	// streaming is the subscription's streaming for a streamed workload
	// (Options.Streaming).
	streaming string
	// cpuStart is the clusters' CPU before the drain, cpu what the drain
	// spent (drained).
	cpuStart cpuSnapshot
	cpu      CPU
}

// harness is the state of one Run across its runs.
type harness struct {
	opts        Options
	walapplyBin string
	// noStreaming is set once walapply refused --streaming on; later runs
	// then ask for off directly.
	noStreaming bool
}

// Run measures every selected workload on every selected version,
// Options.Runs times per applier, alternating the appliers. A failed run is
// recorded in the report (and logged) and the harness goes on; the error
// is for failures that prevent measuring at all.
func Run(ctx context.Context, opts Options) (*Report, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	rep := &Report{Options: opts, Started: time.Now().UTC(), LoadStart: loadAvg()}
	if opts.ModuleDir == "" {
		if opts.ModuleDir, err = moduleDir(ctx); err != nil && opts.WalapplyBin == "" {
			return nil, err
		}
	}
	rep.Options.ModuleDir = opts.ModuleDir
	rep.Git = gitState(ctx, opts.ModuleDir)
	h := &harness{opts: opts, walapplyBin: opts.WalapplyBin}
	if h.walapplyBin == "" {
		dir, err := os.MkdirTemp("", "walbench-")
		if err != nil {
			return nil, fmt.Errorf("bench: creating a directory for the walapply binary: %w", err)
		}
		defer os.RemoveAll(dir)
		if opts.WalapplyRev != "" {
			logf(opts.Log, "building walapply at revision %s of %s", opts.WalapplyRev, opts.ModuleDir)
			var commit string
			if h.walapplyBin, commit, err = buildWalapplyAt(ctx, opts.ModuleDir, opts.WalapplyRev, dir); err != nil {
				return nil, err
			}
			rep.Git = GitState{Head: commit, Revision: true}
		} else {
			logf(opts.Log, "building walapply in %s", opts.ModuleDir)
			if h.walapplyBin, err = buildWalapply(ctx, opts.ModuleDir, dir); err != nil {
				return nil, err
			}
		}
	}
	for _, v := range opts.Versions {
		for _, name := range opts.Workloads {
			w, _ := lookupWorkload(name)
			for i := range opts.Runs {
				order := slices.Clone(opts.Appliers)
				if i%2 == 1 {
					slices.Reverse(order)
				}
				for _, a := range order {
					if err := ctx.Err(); err != nil {
						rep.Finished, rep.LoadEnd = time.Now().UTC(), loadAvg()
						return rep, err
					}
					res := h.once(ctx, w, v, i+1, a)
					rep.Results = append(rep.Results, res)
					if res.Err != nil {
						logf(opts.Log, "FAILED %s PG%d run %d %s: %v", w.name, v, i+1, a, res.Err)
					}
				}
			}
		}
	}
	rep.Finished, rep.LoadEnd = time.Now().UTC(), loadAvg()
	return rep, nil
}

// once prepares fresh clusters, builds the backlog, times the decode
// ceiling, drains with applier a and verifies.
func (h *harness) once(ctx context.Context, w workload, version, run int, a Applier) (res RunResult) {
	res = RunResult{Workload: w.name, Version: version, Applier: a, Run: run}
	log := func(format string, args ...any) {
		logf(h.opts.Log, "%s PG%d run %d %s: %s", w.name, version, run, a, fmt.Sprintf(format, args...))
	}
	dir, err := os.MkdirTemp("", "walbench-run-")
	if err != nil {
		res.Err = fmt.Errorf("creating a scratch directory: %w", err)
		return res
	}
	defer os.RemoveAll(dir)
	r := &runEnv{version: version, scale: h.opts.Scale, db: benchDB, dir: dir, streaming: h.opts.Streaming}
	var targetSettings map[string]string
	sourceVersion := version
	if w.initialCopy {
		targetSettings = copySettings(h.opts.CopyWorkers)
		if h.opts.CopySchema {
			r.schema, sourceVersion = true, schemaSourceVersion
			res.Note = fmt.Sprintf("source PostgreSQL %d, target %d, schema created in the drain (walapply --schema; builtin: pg_dump --schema-only | psql)", sourceVersion, version)
		}
	}
	if r.source, r.target, err = startPair(ctx, sourceVersion, version, targetSettings); err != nil {
		res.Err = err
		return res
	}
	defer r.source.Close()
	defer r.target.Close()

	if err := r.setup(ctx, w); err != nil {
		res.Err = err
		return res
	}
	start := time.Now()
	if err := w.generate(ctx, r); err != nil {
		res.Err = fmt.Errorf("generating the %s backlog on the source: %w", w.name, err)
		return res
	}
	if err := r.exec(ctx, r.source, `INSERT INTO `+markerTable+` VALUES (1, clock_timestamp())`); err != nil {
		res.Err = fmt.Errorf("inserting the marker row: %w", err)
		return res
	}
	res.Generate = time.Since(start)
	if w.initialCopy {
		// Nothing to decode: the copy reads the tables.
		if res.CopyBytes, err = r.copySize(ctx); err != nil {
			res.Err = err
			return res
		}
		log("source filled in %s, %s to copy", round(res.Generate), formatBytes(res.CopyBytes))
	} else {
		if res.Decode, res.Messages, err = r.decodeCeiling(ctx); err != nil {
			res.Err = err
			return res
		}
		log("backlog generated in %s, %d messages decoded in %s", round(res.Generate), res.Messages, round(res.Decode))
	}

	if err := r.settle(ctx); err != nil {
		res.Err = err
		return res
	}
	nb, err := startNeighbours(ctx, h.opts.Neighbour, h.opts.DrainTimeout+time.Minute)
	if err != nil {
		res.Err = err
		return res
	}
	if r.cpuStart, err = r.cpuNow(); err != nil {
		nb.stop()
		res.Err = err
		return res
	}
	switch a {
	case Builtin:
		res.Drain, err = r.drainBuiltin(ctx, w, h.opts.DrainTimeout)
	case Walapply:
		var note string
		res.Drain, res.PeakRSS, note, err = h.drainWalapply(ctx, r, w)
		if note != "" {
			res.Note = strings.TrimPrefix(res.Note+"; "+note, "; ")
		}
	}
	res.Load = load1()
	nb.stop()
	if err != nil {
		res.Err = fmt.Errorf("draining with %s: %w", a, err)
		return res
	}
	res.CPU = r.cpu
	if res.Verified, err = verify(ctx, r.source, r.target, r.db); err != nil {
		res.Err = err
		return res
	}
	msg := fmt.Sprintf("drained in %s; %d tables, %d rows identical", round(res.Drain), res.Verified.Tables, res.Verified.Rows)
	if res.PeakRSS > 0 {
		msg += fmt.Sprintf("; peak RSS %s", formatBytes(res.PeakRSS))
	}
	msg += "; CPU " + res.CPU.String()
	if res.CopyBytes > 0 {
		msg += "; " + copyRates(res.CopyBytes, res.Verified.Rows, res.Drain, res.CPU)
	}
	if h.opts.Neighbour > 0 {
		msg += fmt.Sprintf("; %d neighbour processes, load %.2f", h.opts.Neighbour, res.Load)
	}
	if res.Note != "" {
		msg += "; " + res.Note
	}
	log("%s", msg)
	return res
}

func logf(w interface{ Write([]byte) (int, error) }, format string, args ...any) {
	fmt.Fprintf(w, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func round(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
