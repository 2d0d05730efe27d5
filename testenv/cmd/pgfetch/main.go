// Command pgfetch makes sure the PostgreSQL binaries that testenv needs are
// in its cache, fetching missing ones, and prints where they are.
//
//	go run ./testenv/cmd/pgfetch [VERSION… | all]
//
// Without arguments it fetches the versions selected by WALAPPLY_TEST_PG.
// Tests fetch missing binaries on their own; running pgfetch first (make pg)
// keeps the download out of test timings and fails early without network.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/walapply/walapply/testenv"
)

func main() {
	versions, err := parseArgs(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgfetch:", err)
		os.Exit(2)
	}
	failed := false
	for _, v := range versions {
		dir, err := testenv.BinDir(v)
		if err != nil {
			fmt.Fprintf(os.Stderr, "pgfetch: PostgreSQL %d: %v\n", v, err)
			failed = true
			continue
		}
		out, err := exec.Command(filepath.Join(dir, "postgres"), "--version").Output()
		if err != nil {
			fmt.Fprintf(os.Stderr, "pgfetch: PostgreSQL %d: running postgres --version: %v\n", v, err)
			failed = true
			continue
		}
		fmt.Printf("%s\t%s\n", strings.TrimSpace(string(out)), dir)
	}
	if failed {
		os.Exit(1)
	}
}

// parseArgs turns the command line into major versions.
func parseArgs(args []string) ([]int, error) {
	if len(args) == 0 {
		return testenv.Versions()
	}
	if len(args) == 1 && args[0] == "all" {
		return testenv.SupportedVersions(), nil
	}
	var out []int
	for _, a := range args {
		v, err := strconv.Atoi(a)
		if err != nil {
			return nil, fmt.Errorf("%q is not a major version (usage: pgfetch [VERSION… | all])", a)
		}
		out = append(out, v)
	}
	return out, nil
}
