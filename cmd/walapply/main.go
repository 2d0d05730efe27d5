// Command walapply is a PostgreSQL logical-replication subscriber: it reads a
// source's changes from a pgoutput slot and replays them onto a target.
//
//	walapply run     keep a target an exact replica of a source's publications
//	walapply decode  print the decoded replication stream as JSON lines
//	walapply demo    replicate between two throwaway local clusters
//	walapply compare compare the published tables on the source and the target
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/walapply/walapply/internal/secret"
)

// command is one subcommand. Each registers itself from its own file.
type command struct {
	summary string
	// run parses args (without the command name) and runs. It returns the
	// process exit code's cause: nil for success.
	run func(ctx context.Context, args []string) error
}

var commands = map[string]command{}

// printed masks what this process prints to stderr (its log and its last
// error) with the passwords of every connection string it was given: the
// same rule as the errors of the packages it uses (package secret), as a
// last line of defence. nil (in tests calling commands directly) masks
// nothing.
var printed *secret.Set

// defaultMemoryLimit is the soft memory limit of the Go runtime (see main).
const defaultMemoryLimit = 40 << 20

func register(name string, c command) { commands[name] = c }

func usage() {
	fmt.Fprintf(os.Stderr, "usage: walapply <command> [flags]\n\ncommands:\n")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-8s %s\n", n, commands[n].summary)
	}
	fmt.Fprintf(os.Stderr, "\nrun 'walapply <command> -h' for the flags of a command; every flag can also be\nset with an environment variable WALAPPLY_<FLAG> (dashes as underscores).\n")
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage()
		os.Exit(2)
	}
	c, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "walapply: unknown command %q\n\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	// Memory: walapply's working set is bounded by design (batches, groups
	// and spill buffers have fixed bounds); a soft limit keeps the garbage
	// collector from letting the heap double past it. GOMEMLIMIT overrides.
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(defaultMemoryLimit)
	}
	// SIGINT/SIGTERM cancel the context: every command stops at a clean point.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	printed = secret.New(givenStrings(os.Args[2:])...)
	err := c.run(ctx, os.Args[2:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		fmt.Fprintf(os.Stderr, "walapply %s: %s\n", os.Args[1], printed.Scrub(err.Error()))
		var ee exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		os.Exit(1)
	}
}

// exitError is an error with its own exit status (e.g. compare's 2 for
// "could not compare" against 1 for "differs").
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

// givenStrings returns what may be a connection string among the
// arguments (each, and the value of each --flag=value) and the WALAPPLY_*
// environment variables.
func givenStrings(args []string) []string {
	out := slices.Clone(args)
	for _, a := range args {
		if _, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(a, "-") {
			out = append(out, v)
		}
	}
	for _, kv := range os.Environ() {
		if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "WALAPPLY_") {
			out = append(out, v)
		}
	}
	return out
}

// newFlagSet returns a FlagSet for a command whose flags all have an
// environment fallback: flag "spill-dir" reads WALAPPLY_SPILL_DIR.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("walapply "+name, flag.ContinueOnError)
	if printed != nil {
		fs.SetOutput(printed.Writer(os.Stderr))
	}
	return fs
}

// parseWithEnv parses args after applying environment defaults to every
// flag that the command line does not set.
func parseWithEnv(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || err != nil {
			return
		}
		env := envName(f.Name)
		if v, ok := os.LookupEnv(env); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("environment variable %s: %w", env, e)
			}
		}
	})
	return err
}

// envName maps a flag name to its environment variable.
func envName(flagName string) string {
	return "WALAPPLY_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}
