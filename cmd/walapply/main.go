// Command walapply is a PostgreSQL logical-replication subscriber: it reads a
// source's changes from a pgoutput slot and replays them onto a target.
//
//	walapply run     keep a target an exact replica of a source's publications
//	walapply decode  print the decoded replication stream as JSON lines
//	walapply demo    replicate between two throwaway local clusters
//	walapply compare compare the published tables on the source and the target
//	walapply version print the version, revision and Go version
//
// `walapply help` lists every command, `walapply <command> -h` its flags.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/walapply/walapply/internal/buildinfo"
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

// usage prints the commands, aligned, and how to learn more.
func usage(w io.Writer) {
	fmt.Fprintf(w, "usage: walapply <command> [flags]\n\ncommands:\n")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	rows := [][2]string{}
	for _, n := range names {
		rows = append(rows, [2]string{n, commands[n].summary})
	}
	rows = append(rows, [2]string{"help", "print this help, or with a command's name its flags"},
		[2]string{"version", "print walapply's version, the revision it was built from and its Go version (also --version)"})
	width := 0
	for _, r := range rows {
		width = max(width, len(r[0]))
	}
	for _, r := range rows {
		fmt.Fprintf(w, "  %-*s  %s\n", width, r[0], r[1])
	}
	fmt.Fprintf(w, "\nrun 'walapply <command> -h' for the flags of a command; every flag can also be\nset with an environment variable WALAPPLY_<FLAG> (dashes as underscores).\n")
}

func main() {
	args := os.Args[1:]
	if len(args) == 0 {
		usage(os.Stderr)
		os.Exit(2)
	}
	switch args[0] {
	case "-h", "-help", "--help":
		usage(os.Stdout)
		os.Exit(0)
	case "help":
		if len(args) == 1 {
			usage(os.Stdout)
			os.Exit(0)
		}
		args = []string{args[1], "-h"} // walapply help run: walapply run -h
	case "version", "-version", "--version":
		fmt.Println(buildinfo.Read())
		os.Exit(0)
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "walapply: unknown command %q\n\n", args[0])
		usage(os.Stderr)
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
	printed = secret.New(givenStrings(args[1:])...)
	code := exitCode(os.Stdout, os.Stderr, args[0], c.run(ctx, args[1:]))
	stop()
	os.Exit(code)
}

// exitCode prints how command name ended and returns the exit status: 0
// for success and help, 2 for a usage error, 1 for anything else.
func exitCode(stdout, stderr io.Writer, name string, err error) int {
	var help *helpRequest
	var usageErr *usageError
	var logged *loggedError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &help):
		io.WriteString(stdout, help.text)
		return 0
	case errors.As(err, &usageErr):
		fmt.Fprintf(stderr, "walapply %s: %s\nrun 'walapply %s -h' for its flags\n", name, printed.Scrub(usageErr.msg), name)
		return 2
	case errors.As(err, &logged):
		return 1 // the log has it already, as its last record
	}
	fmt.Fprintf(stderr, "walapply %s: %s\n", name, printed.Scrub(err.Error()))
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 1
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
