// Command runbook runs issue 20's whole migration path once (package
// bench, runbook.go): a PostgreSQL 15 source written to by pgbench during
// the whole run, migrated into an empty PostgreSQL 18 target with
// `walapply run --copy --schema`, caught up, cut over with SIGUSR1,
// compared and its sequences set, each phase timed:
//
//	go run ./bench/cmd/runbook --markdown bin/benchmarks-runbook.md
//
// It prints the report as Markdown (for BENCHMARKS.md) and exits with
// status 1 if any step failed, compare's finding of a difference included.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/walapply/walapply/bench"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "runbook:", err)
		os.Exit(1)
	}
}

func run() error {
	fs := flag.NewFlagSet("runbook", flag.ContinueOnError)
	scale := fs.Float64("scale", 1, "factor on the migrate workload's size (1: about 1.7 GB; 0.01 for a smoke run)")
	rate := fs.Int("rate", 100, "pgbench -N transactions per second on the source during the run")
	clients := fs.Int("clients", 2, "pgbench's clients")
	target := fs.Int("target-version", 18, "the target's PostgreSQL major version (the source is 15)")
	copyWorkers := fs.Int("copy-workers", 2, "walapply's --copy-workers and --index-workers")
	walapplyBin := fs.String("walapply-bin", "", "a prebuilt walapply binary (default: build ./cmd/walapply)")
	markdown := fs.String("markdown", "", "also write the report to this file")
	keepLog := fs.String("keep-log", "", "a file to keep walapply run's log in")
	timeout := fs.Duration("timeout", 0, "limit of the whole run (default 30m)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := bench.Runbook(ctx, bench.RunbookOptions{
		Scale:         *scale,
		Rate:          *rate,
		Clients:       *clients,
		TargetVersion: *target,
		CopyWorkers:   *copyWorkers,
		WalapplyBin:   *walapplyBin,
		Timeout:       *timeout,
		KeepLog:       *keepLog,
		Command:       "go run ./bench/cmd/runbook " + strings.Join(os.Args[1:], " "),
		Log:           os.Stderr,
	})
	if rep != nil {
		fmt.Println()
		if werr := rep.WriteMarkdown(os.Stdout); werr != nil {
			return werr
		}
		if *markdown != "" {
			f, ferr := os.Create(*markdown)
			if ferr != nil {
				return ferr
			}
			if werr := rep.WriteMarkdown(f); werr != nil {
				f.Close()
				return werr
			}
			if cerr := f.Close(); cerr != nil {
				return cerr
			}
		}
	}
	return err
}
