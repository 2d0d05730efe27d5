package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/walapply/walapply/testenv"
)

// The runbook's publication and slot on the source.
const (
	runbookPublication = "migrate"
	runbookSlot        = "migrate"
)

// RunbookOptions configures Runbook.
type RunbookOptions struct {
	// Scale multiplies the migrate workload's size (1 is the benchmark's
	// size, about 1.7 GB; 0.01 a smoke run); 0 means 1.
	Scale float64
	// Rate is pgbench's transactions per second during the run (-R,
	// across all clients); 0 means 100.
	Rate int
	// Clients are pgbench's connections (-c); 0 means 2.
	Clients int
	// TargetVersion is the target's PostgreSQL major version; 0 means
	// 18. The source is PostgreSQL 15, the only pg_dump there is.
	TargetVersion int
	// CopyWorkers is walapply's --copy-workers and --index-workers; 0
	// means 2.
	CopyWorkers int
	// WalapplyBin is a prebuilt walapply binary; empty builds
	// ./cmd/walapply of the module in ModuleDir.
	WalapplyBin, ModuleDir string
	// Timeout bounds the whole benchmark; 0 means 30 minutes.
	Timeout time.Duration
	// KeepLog, if set, is a file that receives walapply run's log.
	KeepLog string
	// Command is recorded in the report as the command that produced it.
	Command string
	// Log receives one progress line per step; nil discards them.
	Log io.Writer
}

func (o RunbookOptions) withDefaults() RunbookOptions {
	if o.Scale == 0 {
		o.Scale = 1
	}
	if o.Rate == 0 {
		o.Rate = 100
	}
	if o.Clients == 0 {
		o.Clients = 2
	}
	if o.CopyWorkers == 0 {
		o.CopyWorkers = 2
	}
	if o.TargetVersion == 0 {
		o.TargetVersion = 18
	}
	if o.Timeout == 0 {
		o.Timeout = 30 * time.Minute
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	return o
}

// ErrCompare reports that walapply compare found source and target
// different after the cut-over (or could not compare them).
var ErrCompare = errors.New("bench: compare after the cut-over did not find source and target equal")

// runbookEnv is what the runbook's steps share.
type runbookEnv struct {
	opts   RunbookOptions
	r      *runEnv
	bin    string
	rep    *RunbookReport
	logf   func(format string, args ...any)
	source string // connection strings
	target string
}

// Runbook runs issue 20's whole path once, at the benchmark's
// size, the way docs/MIGRATION.md tells a user to do it: a PostgreSQL 15
// source holding the migrate workload's data (migrate.go: pgbench's
// tables at scale 50 and 900,000 rows of 1 kB, at RunbookOptions.Scale
// times that), written to by pgbench -N at a bounded rate during the whole
// copy and follow, migrates into an empty PostgreSQL 18 target
// (RunbookOptions.TargetVersion):
//
//  1. copy and follow: `walapply run --copy --create-slot --schema`
//     (pre-data, the copy, post-data, then streaming), `walapply status
//     --json` polled twice a second until the copy is complete and the
//     origin has passed the source's position of the first poll that saw
//     it complete (caught up with the writes made during the copy);
//  2. stop writes: pgbench interrupted, and its backends gone;
//  3. cut-over: SIGUSR1 to the running applier ("until now"), which must
//     exit 0 printing the position reached, and status show it reached;
//  4. compare: `walapply compare` (exit 0: equal; anything else fails the
//     benchmark, loudly);
//  5. sequences: `walapply sequences`, then pgbench_history's sequence
//     checked on the target.
//
// Each phase is timed with the CPU the source cluster, the target cluster
// and the walapply process spent in it (cpu.go). pgbench's backends count
// in the source's CPU, and the status polls' in both clusters'. After the
// last phase, bench's own row-by-row comparison (verify.go) checks the
// tables once more, outside the timed phases.
//
// It returns the report; the error is for a path that did not complete:
// a failed step, a compare that did not find the two sides equal
// (ErrCompare), a row-by-row check that found a difference. The report is
// returned with what was measured up to there.
func Runbook(ctx context.Context, opts RunbookOptions) (*RunbookReport, error) {
	opts = opts.withDefaults()
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	rep := &RunbookReport{Options: opts, Started: time.Now().UTC(), LoadStart: loadAvg(),
		SourceVersion: schemaSourceVersion, TargetVersion: opts.TargetVersion}
	defer func() { rep.Finished, rep.LoadEnd = time.Now().UTC(), loadAvg() }()
	e := &runbookEnv{opts: opts, rep: rep, bin: opts.WalapplyBin}
	e.logf = func(format string, args ...any) { logf(opts.Log, "runbook: %s", fmt.Sprintf(format, args...)) }
	dir, err := os.MkdirTemp("", "walbench-runbook-")
	if err != nil {
		return rep, fmt.Errorf("bench: creating a scratch directory: %w", err)
	}
	defer os.RemoveAll(dir)
	if opts.ModuleDir == "" {
		if opts.ModuleDir, err = moduleDir(ctx); err != nil && e.bin == "" {
			return rep, err
		}
	}
	rep.Git = gitState(ctx, opts.ModuleDir)
	if e.bin == "" {
		e.logf("building walapply in %s", opts.ModuleDir)
		if e.bin, err = buildWalapply(ctx, opts.ModuleDir, dir); err != nil {
			return rep, err
		}
	}
	e.r = &runEnv{version: schemaSourceVersion, scale: opts.Scale, db: benchDB, dir: dir, schema: true}
	if e.r.source, e.r.target, err = startPair(ctx, rep.SourceVersion, rep.TargetVersion, nil); err != nil {
		return rep, err
	}
	defer e.r.source.Close()
	defer e.r.target.Close()
	e.source, e.target = e.r.source.ConnString(benchDB), e.r.target.ConnString(benchDB)
	if err := e.fill(ctx); err != nil {
		return rep, err
	}
	if err := e.migrate(ctx); err != nil {
		return rep, err
	}
	e.logf("checking every table row by row")
	if rep.Verified, err = verify(ctx, e.r.source, e.r.target, benchDB); err != nil {
		return rep, fmt.Errorf("bench: the row-by-row check after the runbook: %w", err)
	}
	e.logf("%d tables, %d rows identical", rep.Verified.Tables, rep.Verified.Rows)
	return rep, nil
}

// fill creates the migrate workload's tables and data on the source
// alone (the target stays empty: --schema creates its tables) and the
// publication, and measures what is to copy.
func (e *runbookEnv) fill(ctx context.Context) error {
	w := migrateWorkload()
	start := time.Now()
	if err := e.r.source.CreateDatabase(ctx, benchDB); err != nil {
		return err
	}
	if err := e.r.target.CreateDatabase(ctx, benchDB); err != nil {
		return err
	}
	if err := w.prepare(ctx, e.r, e.r.source); err != nil {
		return fmt.Errorf("bench: creating the migrate tables on the source: %w", err)
	}
	if err := w.generate(ctx, e.r); err != nil {
		return fmt.Errorf("bench: filling the source: %w", err)
	}
	if err := e.r.exec(ctx, e.r.source, `CREATE PUBLICATION `+runbookPublication+` FOR ALL TABLES`); err != nil {
		return err
	}
	var err error
	if e.rep.SourceBytes, err = e.r.copySize(ctx); err != nil {
		return err
	}
	if e.rep.Tables, e.rep.SourceRows, err = e.countRows(ctx); err != nil {
		return err
	}
	e.rep.Fill = time.Since(start)
	e.logf("source PostgreSQL %d filled in %s: %d tables, %d rows, %s",
		e.rep.SourceVersion, round(e.rep.Fill), e.rep.Tables, e.rep.SourceRows, formatBytes(e.rep.SourceBytes))
	return e.r.settle(ctx)
}

// countRows counts the rows of every table of schema public on the source.
func (e *runbookEnv) countRows(ctx context.Context) (tables int, rows int64, err error) {
	conn, err := e.r.source.Connect(ctx, benchDB)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close(context.Background())
	names, err := publicTables(ctx, conn)
	if err != nil {
		return 0, 0, err
	}
	for _, t := range names {
		var n int64
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+t).Scan(&n); err != nil {
			return 0, 0, fmt.Errorf("counting the rows of %s on the source: %w", t, err)
		}
		rows += n
	}
	return len(names), rows, nil
}

// migrate runs the five phases.
func (e *runbookEnv) migrate(ctx context.Context) error {
	writes, err := startWrites(ctx, e.r.source, e.opts, e.r.dir)
	if err != nil {
		return err
	}
	defer writes.kill()
	e.logf("pgbench -N writing at %d transactions/s from %d clients", e.opts.Rate, e.opts.Clients)
	// A moment of writes before the applier starts: the source is
	// written to during the whole run.
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Second):
	}

	logPath := filepath.Join(e.r.dir, "walapply-run.log")
	if e.opts.KeepLog != "" {
		defer copyFile(logPath, e.opts.KeepLog, e.logf)
	}
	pgDump, err := testenv.Tool(schemaSourceVersion, "pg_dump")
	if err != nil {
		return err
	}
	workers := fmt.Sprint(e.opts.CopyWorkers)
	ph := e.startPhase("copy and follow: pre-data, copy, post-data, streaming until caught up")
	run, err := startChild(logPath, e.bin, "run", "--source", e.source, "--target", e.target,
		"--slot", runbookSlot, "--create-slot", "--publication", runbookPublication,
		"--copy", "--copy-workers", workers, "--schema", "--index-workers", workers, "--pg-dump", pgDump)
	if err != nil {
		return err
	}
	defer run.kill()
	caught, err := e.waitCaughtUp(ctx, run, writes)
	if err != nil {
		return err
	}
	e.rep.CopyDone, e.rep.CaughtUp = caught.copyDone, caught
	if err := e.endPhase(ctx, ph, run.cpu()); err != nil {
		return err
	}
	e.logf("copy complete after %s, caught up after %s (lag %d bytes)", round(caught.copyDone), round(ph.Duration), caught.lagBytes)

	ph = e.startPhase("stop writes: pgbench interrupted, its backends gone")
	before := run.cpu()
	if e.rep.Writes, e.rep.WriteTime, err = writes.stop(ctx, e.r.source); err != nil {
		return err
	}
	if err := e.endPhase(ctx, ph, run.cpu()-before); err != nil {
		return err
	}
	e.logf("%d write transactions in %s (%.1f/s)", e.rep.Writes, round(e.rep.WriteTime), e.rep.WriteRate())

	if err := e.cutOver(ctx, run); err != nil {
		return err
	}
	if err := e.compare(ctx); err != nil {
		return err
	}
	return e.sequences(ctx)
}

// startPhase starts timing a phase and the clusters' CPU in it.
func (e *runbookEnv) startPhase(name string) *RunbookPhase {
	ph := &RunbookPhase{Name: name, start: time.Now()}
	ph.cpuStart, ph.cpuErr = e.r.cpuNow()
	return ph
}

// endPhase ends a phase, walapply having spent own CPU in it, and adds
// it to the report.
func (e *runbookEnv) endPhase(ctx context.Context, ph *RunbookPhase, own time.Duration) error {
	ph.Duration = time.Since(ph.start)
	if ph.cpuErr != nil {
		return ph.cpuErr
	}
	now, err := e.r.cpuNow()
	if err != nil {
		return err
	}
	ph.CPU = CPU{Source: now.source - ph.cpuStart.source, Target: now.target - ph.cpuStart.target, Walapply: own,
		Segments: now.segments - ph.cpuStart.segments}
	e.rep.Phases = append(e.rep.Phases, *ph)
	return ctx.Err()
}

// copyFile copies walapply's log to where RunbookOptions.KeepLog says; a
// failure is only logged.
func copyFile(from, to string, logf func(string, ...any)) {
	b, err := os.ReadFile(from)
	if err == nil {
		err = os.WriteFile(to, b, 0o644)
	}
	if err != nil {
		logf("keeping walapply's log: %v", err)
	}
}
