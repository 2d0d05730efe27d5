package testenv

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// startTimeout bounds NewCluster and NewPair. Binaries are fetched before
// it applies; what remains (copy, start, possibly a one-time initdb) takes
// about a second, so this is only a guard against a hung server.
const startTimeout = 2 * time.Minute

// logTailLines is how much of each server log a failed test prints.
const logTailLines = 40

// PairOptions configures NewPair.
type PairOptions struct {
	// Version of both clusters; 0 means the lowest selected by
	// WALAPPLY_TEST_PG.
	Version int
	// SourceSettings and TargetSettings are extra postgresql.conf
	// parameters for each side (see Options.Settings).
	SourceSettings, TargetSettings map[string]string
	// SkipMissing: as Options.SkipMissing.
	SkipMissing bool
}

// Pair is a source and a target cluster of the same version, as a
// replication test needs them.
type Pair struct {
	Source, Target *Cluster
}

// NewCluster starts a cluster for the test and closes it when the test ends
// (tb.Cleanup); under -short it skips the test (SkipShort). If the test
// failed, the end of the server log is printed and the log file is kept;
// its path is printed too.
func NewCluster(tb testing.TB, opts Options) *Cluster {
	tb.Helper()
	SkipShort(tb)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c, err := Start(ctx, opts)
	if err != nil {
		skipMissing(tb, opts.SkipMissing, err) // locate.go
		tb.Fatal(err)
	}
	tb.Cleanup(func() { closeForTest(tb, c, "cluster") })
	return c
}

// NewPair starts a source and a target cluster in parallel and closes both
// when the test ends, like NewCluster.
func NewPair(tb testing.TB, opts PairOptions) *Pair {
	tb.Helper()
	SkipShort(tb)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	var (
		wg       sync.WaitGroup
		clusters [2]*Cluster
		errs     [2]error
	)
	for i, settings := range []map[string]string{opts.SourceSettings, opts.TargetSettings} {
		wg.Go(func() {
			clusters[i], errs[i] = Start(ctx, Options{Version: opts.Version, Settings: settings})
		})
	}
	wg.Wait()
	for i, role := range []string{"source", "target"} {
		if clusters[i] != nil {
			tb.Cleanup(func() { closeForTest(tb, clusters[i], role) })
		}
	}
	for i, role := range []string{"source", "target"} {
		if errs[i] != nil {
			skipMissing(tb, opts.SkipMissing, errs[i]) // locate.go
			tb.Fatalf("starting the %s cluster: %v", role, errs[i])
		}
	}
	return &Pair{Source: clusters[0], Target: clusters[1]}
}

// closeForTest closes c at the end of a test; after a failure it first
// prints the log's tail and keeps the log.
func closeForTest(tb testing.TB, c *Cluster, role string) {
	if tb.Failed() {
		tb.Logf("%s (PostgreSQL %d, port %d): last lines of the server log:\n%s", role, c.version, c.port, c.logTail(logTailLines))
		if kept, err := keepLog(c, tb.Name(), role); err != nil {
			tb.Logf("%s: could not keep the server log: %v", role, err)
		} else {
			tb.Logf("%s: server log kept at %s", role, kept)
		}
	}
	if err := c.Close(); err != nil {
		tb.Errorf("closing the %s cluster: %v", role, err)
	}
}

// keptLogsDir holds the logs of failed tests, outside the cluster
// directories so that neither Close nor a later sweep deletes them.
var keptLogsDir = sync.OnceValues(func() (string, error) {
	return os.MkdirTemp("", "walapply-testenv-logs-")
})

// keepLog copies the server log of c to keptLogsDir and returns the copy's
// path.
func keepLog(c *Cluster, testName, role string) (string, error) {
	dir, err := keptLogsDir()
	if err != nil {
		return "", err
	}
	name := strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == ' ' || r == ':' {
			return '_'
		}
		return r
	}, testName)
	in, err := os.Open(c.logPath)
	if err != nil {
		return "", err
	}
	defer in.Close()
	out, err := os.CreateTemp(dir, fmt.Sprintf("%s-%s-pg%d-*.log", name, role, c.version))
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return "", err
	}
	return filepath.Clean(out.Name()), out.Close()
}
