package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/twophase"
)

func init() {
	register("run", command{summary: "keep a target an exact replica of a source's publications", run: runCmd})
}

// runFlags are the flags of 'walapply run' (a contract: keep these names).
type runFlags struct {
	cfg          apply.Config
	publications string
	logFormat    string
	onConflict   string
	skipLSN      string
	logLevel     string
	metricsAddr  string
	readyMaxLag  time.Duration
	gidMode      string
	cpuProfile   string
	until        string
	// run_wait.go
	onPermanentError   string
	errorRetryInterval time.Duration
	splitSize          string
	indexMemory        string
}

func (f *runFlags) register(fs interface {
	StringVar(*string, string, string, string)
	BoolVar(*bool, string, bool, string)
	IntVar(*int, string, int, string)
	DurationVar(*time.Duration, string, time.Duration, string)
}) {
	c := &f.cfg
	fs.StringVar(&c.Source, "source", "", "source connection string (URL or key=value); walapply adds replication=database")
	fs.StringVar(&c.Target, "target", "", "target connection string")
	fs.StringVar(&c.Slot, "slot", "", "the source's pgoutput replication slot")
	fs.StringVar(&f.publications, "publication", "", "publication(s) to replicate, comma-separated")
	fs.BoolVar(&c.CreateSlot, "create-slot", false, "create the slot when it does not exist")
	fs.BoolVar(&c.Copy, "copy", false, "first copy every published table's rows into the (empty) target tables, creating the slot, then follow; an interrupted copy resumes, a finished one is not repeated")
	fs.IntVar(&c.CopyWorkers, "copy-workers", 2, "with --copy: how many tables (or ranges of big tables, --copy-split-size) to copy at once")
	fs.BoolVar(&c.Schema, "schema", false, "with --copy: first create the published tables and what they need on the target from the source's pg_dump; indexes, constraints and triggers after the copy")
	fs.IntVar(&c.IndexWorkers, "index-workers", 2, "with --schema: how many indexes to build at once after the copy")
	fs.StringVar(&f.indexMemory, "index-memory", "256MB", "with --schema: the maintenance_work_mem each index build of the post-data section asks for at least (bytes, or with kB, MB, GB); the target's setting if higher; 0 or off: the target's setting")
	fs.StringVar(&c.PgDump, "pg-dump", "", "with --schema: the pg_dump to use, at least the source's major version (default: on PATH, or in pg_config --bindir)")
	fs.StringVar(&f.splitSize, "copy-split-size", "auto", "with --copy: tables larger than this on the source (pg_relation_size; bytes, or with kB, MB, GB, TB) are copied in ranges by several workers; auto: 256MB with --schema, else 1GB, and smaller tables too where copying one whole would keep the copy waiting while other workers idle; 0 or off: never")
	fs.StringVar(&c.CopyFormat, "copy-format", "auto", "with --copy: COPY format, auto (binary for tables whose column types are the same on both sides, else text) or text")
	fs.StringVar(&c.Name, "name", "", "this applier's name (default: the slot name); names the target's replication origin")
	fs.StringVar(&c.Streaming, "streaming", "", "streaming of large in-progress transactions: off, on or parallel (default: on where the source supports it)")
	fs.IntVar(&c.ParallelWorkers, "parallel-workers", 0, "with --streaming parallel: how many streamed transactions are applied as they stream at once, each on a target connection of its own (default 2)")
	fs.BoolVar(&c.TwoPhase, "two-phase", false, "replicate prepared transactions at PREPARE time")
	fs.BoolVar(&c.Failover, "failover", false, "create the slot failover-enabled, so that standbys synchronise it (PostgreSQL 17+)")
	fs.StringVar(&f.gidMode, "gid-mode", "applier", "GIDs of prepared transactions on the target: applier (walapply_<name>_<source xid>) or source (the source's GID)")
	fs.StringVar(&c.Origin, "origin", "any", "which changes to replicate: any, or none for only those made on the source itself (PostgreSQL 16+; for bidirectional setups, see docs/TOPOLOGIES.md)")
	fs.BoolVar(&c.Binary, "binary", false, "binary transfer of values where the source supports it (types must match exactly)")
	fs.StringVar(&c.SpillDir, "spill-dir", "", "directory for spilled streamed transactions")
	fs.BoolVar(&c.AllowTimelineChange, "allow-timeline-change", false, "continue on a source timeline that lacks transactions the target applied (a refused failover; logged as a warning)")
	fs.DurationVar(&c.ProgressInterval, "progress-interval", 10*time.Second, "how often to log a progress line (0: never)")
	fs.DurationVar(&c.FeedbackInterval, "feedback-interval", time.Second, "how often to confirm positions to the source")
	fs.DurationVar(&c.ConnectTimeout, "connect-timeout", 0, "give up when the source and target cannot both be reached within this time at the start (0: retry for ever, logging each retry); lost connections later are always retried")
	fs.StringVar(&f.onConflict, "on-conflict", "", "conflict policies, kind=policy[,...]: kinds insert_exists, update_exists, update_missing, delete_missing; policies error, skip, apply (default: insert_exists=error,update_exists=error,update_missing=skip,delete_missing=skip)")
	fs.StringVar(&f.skipLSN, "skip-lsn", "", "skip the source transaction with this commit LSN (as named by an error), like ALTER SUBSCRIPTION ... SKIP")
	fs.StringVar(&f.until, "until", "", "stop once every source transaction committed at or before this LSN is applied and durable, apply none after it, and exit 0 printing the position (\"now\": the source's current LSN when the run starts; SIGUSR1 asks a running applier for the same); for the cut-over, see docs/MIGRATION.md")
	fs.BoolVar(&c.NoGroupCommit, "no-group-commit", false, "apply every source transaction in a target transaction of its own")
	fs.BoolVar(&c.DDL, "ddl", false, "apply the DDL the source captures (walapply ddl install) at its place in the stream, on published tables")
	fs.BoolVar(&c.NoCompaction, "no-compaction", false, "apply every source change as a statement of its own (no net-effect compaction within groups)")
	fs.StringVar(&f.logFormat, "log-format", "auto", "log format: auto (console on a terminal, else JSON), json or console")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: trace, debug, info, warn, error")
	fs.StringVar(&f.metricsAddr, "metrics-addr", "", "serve Prometheus /metrics and the /healthz and /readyz probes on this address (host:port; empty: off)")
	fs.StringVar(&f.cpuProfile, "cpu-profile", "", "write a Go CPU profile of the whole run to this file (for diagnosing a slow applier; read it with go tool pprof)")
	fs.DurationVar(&f.readyMaxLag, "ready-max-lag", 30*time.Second, "/readyz answers ready while the lag (and the age of the last progress report) is at most this")
	fs.StringVar(&f.onPermanentError, "on-permanent-error", onPermanentExit, "after an error that retrying does not fix: exit (status 1), or wait: stay up, not ready, serving the error in the metrics, and run again after --error-retry or on SIGHUP (for Kubernetes, see docs/KUBERNETES.md)")
	fs.DurationVar(&f.errorRetryInterval, "error-retry", 5*time.Minute, "with --on-permanent-error wait: how long to wait before running again")
}

func runCmd(ctx context.Context, args []string) error {
	fs := newFlagSet("run")
	var f runFlags
	f.register(fs)
	if err := parseWithEnv(fs, args, "source", "target", "slot", "publication"); err != nil {
		return err
	}
	log, err := newLogger(os.Stderr, f.logFormat, f.logLevel)
	if err != nil {
		return &usageError{msg: err.Error()}
	}
	log = log.With().Str("applier", applierName(&f.cfg)).Logger() // on every line
	f.cfg.Logger = log
	f.cfg.Publications = splitList(f.publications)
	if f.cfg.Conflicts, err = apply.ParseConflictPolicies(f.onConflict); err != nil {
		return &usageError{msg: "--on-conflict: " + err.Error()}
	}
	if f.skipLSN != "" {
		if f.cfg.SkipLSN, err = protocol.ParseLSN(f.skipLSN); err != nil {
			return &usageError{msg: "--skip-lsn: " + err.Error()}
		}
	}
	if err := f.setUntil(ctx); err != nil {
		return err
	}
	if f.cfg.CopySplitSize, err = parseSize(f.splitSize); err != nil {
		return &usageError{msg: "--copy-split-size: " + err.Error()}
	}
	if f.cfg.IndexMemory, err = parseSize(f.indexMemory); err != nil || f.cfg.IndexMemory == 0 {
		return &usageError{msg: fmt.Sprintf("--index-memory: %q is not a size (bytes, or a number with kB, MB, GB or TB; 0 or off: the target's setting)", f.indexMemory)}
	}
	if f.cfg.GIDMode, err = twophase.ParseMode(f.gidMode); err != nil {
		return &usageError{msg: "--gid-mode: " + err.Error()}
	}
	if f.cfg.ProgressInterval == 0 {
		f.cfg.ProgressInterval = -1
	}
	switch f.onPermanentError {
	case onPermanentExit, onPermanentWait:
	default:
		return &usageError{msg: fmt.Sprintf("--on-permanent-error: %q: want exit or wait", f.onPermanentError)}
	}
	if f.errorRetryInterval <= 0 {
		return &usageError{msg: "--error-retry: must be more than 0"}
	}
	var waiting waitingObserver
	if f.metricsAddr != "" {
		stop, err := startMetrics(f.metricsAddr, f.readyMaxLag, &f.cfg, log)
		if err != nil {
			return err
		}
		defer stop()
		waiting, _ = f.cfg.Observer.(waitingObserver)
	}
	if f.cpuProfile != "" {
		stop, err := startCPUProfile(f.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	var reached *apply.UntilReached
	f.cfg.OnUntilReached = func(r apply.UntilReached) { reached = &r }
	logged, err := f.runUntilStopped(ctx, log, waiting) // run_wait.go
	if err == nil {
		log.Info().Msg("stopped")
		if reached != nil {
			// The last line on stdout, for a cut-over script to read.
			fmt.Printf("reached %s: every source transaction committed at or before it is applied (target origin at %s)\n", reached.Until, reached.Applied)
		}
		return nil
	}
	if logged {
		return &loggedError{err}
	}
	if console, _ := logsConsole(os.Stderr, f.logFormat); !console {
		return logFatal(log, err)
	}
	return err
}

// applierName is the applier's name as apply.Config.Name defaults it.
func applierName(c *apply.Config) string {
	if c.Name == "" {
		return c.Slot
	}
	return c.Name
}

// startCPUProfile profiles the process into path until the returned
// function is called (when run stops, also on SIGTERM).
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpu-profile: start profiling: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// splitList splits a comma-separated list, dropping blanks around items.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// setUntil reads --until, and makes SIGUSR1 an "until now" request (for
// an applier started without --until, or to stop earlier than it says).
func (f *runFlags) setUntil(ctx context.Context) error {
	switch f.until {
	case "":
	case "now":
		f.cfg.UntilNow = true
	default:
		lsn, err := protocol.ParseLSN(f.until)
		if err != nil {
			return fmt.Errorf("--until: %w (an LSN such as 0/3000148, or now)", err)
		}
		if lsn == 0 {
			return fmt.Errorf("--until: 0/0 is no position; give an LSN such as 0/3000148, or now")
		}
		f.cfg.Until = lsn
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	requests := make(chan struct{}, 1)
	go func() {
		defer signal.Stop(sig)
		for {
			select {
			case <-ctx.Done():
				return
			case <-sig:
				select {
				case requests <- struct{}{}:
				default: // one already waiting
				}
			}
		}
	}()
	f.cfg.UntilNowRequests = requests
	return nil
}
