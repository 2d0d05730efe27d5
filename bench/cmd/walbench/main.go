// Command walbench measures walapply against PostgreSQL's built-in
// subscriber, side by side (see package bench):
//
//	go run ./bench/cmd/walbench --versions 15,18 --runs 3
//
// It prints the summary table, optionally writes it as Markdown (for
// BENCHMARKS.md), and exits with status 1 if any run failed, for example
// because source and target differed after a drain.
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
		fmt.Fprintln(os.Stderr, "walbench:", err)
		os.Exit(1)
	}
}

func run() error {
	fs := flag.NewFlagSet("walbench", flag.ContinueOnError)
	workloads := fs.String("workloads", strings.Join(bench.WorkloadNames(), ","), "workloads to run, comma-separated (also: migrate, issue 20's initial copy)")
	versions := fs.String("versions", "15,18", "PostgreSQL major versions, comma-separated")
	appliers := fs.String("appliers", "builtin,walapply", "appliers to run, comma-separated (one alone for a quick trial)")
	runs := fs.Int("runs", 3, "runs per applier, workload and version")
	scale := fs.Float64("scale", 1, "factor on every workload's size (0.01 for a smoke run)")
	walapplyFlags := fs.String("walapply-flags", "", "extra flags for `walapply run`, space-separated")
	walapplyBin := fs.String("walapply-bin", "", "a prebuilt walapply binary (default: build ./cmd/walapply)")
	walapplyRev := fs.String("walapply-rev", "", "build walapply as committed at this git revision (git archive), not from the working tree")
	markdown := fs.String("markdown", "", "also write the report as Markdown to this file")
	timeout := fs.Duration("drain-timeout", 0, "limit of one drain (default 20m)")
	neighbour := fs.String("neighbour", "off", "CPU-bound processes beside every timed drain: off, cores (one per core) or a number")
	copyWorkers := fs.Int("copy-workers", 2, "tables copied at once in the copy workload, by both appliers")
	keepLogs := fs.String("keep-logs", "", "a directory to keep walapply's log of every drain in")
	streaming := fs.String("streaming", "on", "how both appliers take the streamed workload (bulk): on (spill, apply at commit) or parallel (apply as it streams; PostgreSQL 16+)")
	copySchema := fs.Bool("copy-schema", false, "copy and migrate workloads: the target starts without tables; walapply --schema, builtin after pg_dump --schema-only | psql (source PostgreSQL 15, --versions are the targets')")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	vs, err := bench.ParseVersions(*versions)
	if err != nil {
		return err
	}
	nb, err := bench.ParseNeighbour(*neighbour)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := bench.Run(ctx, bench.Options{
		Workloads:     bench.ParseList(*workloads),
		Versions:      vs,
		Appliers:      parseAppliers(*appliers),
		Runs:          *runs,
		Scale:         *scale,
		WalapplyFlags: strings.Fields(*walapplyFlags),
		WalapplyBin:   *walapplyBin,
		WalapplyRev:   *walapplyRev,
		DrainTimeout:  *timeout,
		Neighbour:     nb,
		CopyWorkers:   *copyWorkers,
		CopySchema:    *copySchema,
		KeepLogs:      *keepLogs,
		Streaming:     *streaming,
		Command:       "go run ./bench/cmd/walbench " + strings.Join(os.Args[1:], " "),
		Log:           os.Stderr,
	})
	if rep != nil && len(rep.Results) > 0 {
		fmt.Println()
		if werr := rep.WriteText(os.Stdout); werr != nil {
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
	if err != nil {
		return err
	}
	if n := len(rep.Failed()); n > 0 {
		return fmt.Errorf("%d run(s) failed (see above)", n)
	}
	return nil
}

func parseAppliers(s string) []bench.Applier {
	var out []bench.Applier
	for _, a := range bench.ParseList(s) {
		out = append(out, bench.Applier(a))
	}
	return out
}
