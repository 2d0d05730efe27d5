package main

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
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
	fs.IntVar(&c.CopyWorkers, "copy-workers", 2, "with --copy: how many tables to copy at once")
	fs.StringVar(&c.CopyFormat, "copy-format", "auto", "with --copy: COPY format, auto (binary for tables whose column types are the same on both sides, else text) or text")
	fs.StringVar(&c.Name, "name", "", "this applier's name (default: the slot name); names the target's replication origin")
	fs.StringVar(&c.Streaming, "streaming", "", "streaming of large in-progress transactions: off, on or parallel (default: on where the source supports it)")
	fs.BoolVar(&c.TwoPhase, "two-phase", false, "replicate prepared transactions at PREPARE time")
	fs.StringVar(&f.gidMode, "gid-mode", "applier", "GIDs of prepared transactions on the target: applier (walapply_<name>_<source xid>) or source (the source's GID)")
	fs.StringVar(&c.Origin, "origin", "any", "which changes to replicate: any, or none for only those made on the source itself (PostgreSQL 16+; for bidirectional setups, see docs/TOPOLOGIES.md)")
	fs.BoolVar(&c.Binary, "binary", false, "binary transfer of values where the source supports it (types must match exactly)")
	fs.StringVar(&c.SpillDir, "spill-dir", "", "directory for spilled streamed transactions")
	fs.BoolVar(&c.AllowTimelineChange, "allow-timeline-change", false, "accept a source timeline other than the recorded one (after a failover)")
	fs.DurationVar(&c.ProgressInterval, "progress-interval", 10*time.Second, "how often to log a progress line (0: never)")
	fs.DurationVar(&c.FeedbackInterval, "feedback-interval", time.Second, "how often to confirm positions to the source")
	fs.StringVar(&f.onConflict, "on-conflict", "", "conflict policies, kind=policy[,...]: kinds insert_exists, update_exists, update_missing, delete_missing; policies error, skip, apply (default: insert_exists=error,update_exists=error,update_missing=skip,delete_missing=skip)")
	fs.StringVar(&f.skipLSN, "skip-lsn", "", "skip the source transaction with this commit LSN (as named by an error), like ALTER SUBSCRIPTION ... SKIP")
	fs.BoolVar(&c.NoGroupCommit, "no-group-commit", false, "apply every source transaction in a target transaction of its own")
	fs.BoolVar(&c.NoCompaction, "no-compaction", false, "apply every source change as a statement of its own (no net-effect compaction within groups)")
	fs.StringVar(&f.logFormat, "log-format", "auto", "log format: auto (console on a terminal, else JSON), json or console")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: trace, debug, info, warn, error")
	fs.StringVar(&f.metricsAddr, "metrics-addr", "", "serve Prometheus /metrics and the /healthz and /readyz probes on this address (host:port; empty: off)")
	fs.StringVar(&f.cpuProfile, "cpu-profile", "", "write a Go CPU profile of the whole run to this file (for diagnosing a slow applier; read it with go tool pprof)")
	fs.DurationVar(&f.readyMaxLag, "ready-max-lag", 30*time.Second, "/readyz answers ready while the lag (and the age of the last progress report) is at most this")
}

func runCmd(ctx context.Context, args []string) error {
	fs := newFlagSet("run")
	var f runFlags
	f.register(fs)
	if err := parseWithEnv(fs, args); err != nil {
		return err
	}
	log, err := newLogger(os.Stderr, f.logFormat, f.logLevel)
	if err != nil {
		return err
	}
	f.cfg.Logger = log
	f.cfg.Publications = splitList(f.publications)
	if f.cfg.Conflicts, err = apply.ParseConflictPolicies(f.onConflict); err != nil {
		return err
	}
	if f.skipLSN != "" {
		if f.cfg.SkipLSN, err = protocol.ParseLSN(f.skipLSN); err != nil {
			return fmt.Errorf("--skip-lsn: %w", err)
		}
	}
	if f.cfg.GIDMode, err = twophase.ParseMode(f.gidMode); err != nil {
		return err
	}
	if f.cfg.ProgressInterval == 0 {
		f.cfg.ProgressInterval = -1
	}
	if f.metricsAddr != "" {
		stop, err := startMetrics(f.metricsAddr, f.readyMaxLag, &f.cfg, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	if f.cpuProfile != "" {
		stop, err := startCPUProfile(f.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	err = apply.Run(ctx, f.cfg)
	if err == nil {
		log.Info().Msg("stopped")
	}
	return err
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
