// Package walapplytc starts a source and a target PostgreSQL in Docker
// containers, through testcontainers-go, for tests of programs that run
// walapply (apply.Run, apply.Start) against real servers.
//
// It lives in a Go module of its own
// (github.com/walapply/walapply/contrib/testcontainers) so that walapply's
// main module does not depend on Docker's client libraries: only programs
// that import this package pull them in. Without Docker, walapply's own
// testenv package starts local clusters from PostgreSQL binaries instead.
//
//	func TestReplicates(t *testing.T) {
//		pair := walapplytc.NewPair(t, walapplytc.Options{}) // skips without Docker
//		// apply.Config{Source: pair.SourceURL, Target: pair.TargetURL, ...}
//	}
//
// Both servers run with wal_level = logical and room for replication slots,
// WAL senders and prepared transactions, so either may serve as source or
// target, and fsync = off, so do not keep data that matters in them.
package walapplytc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"

	tc "github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/modules/postgres"
)

// DefaultImage is the image both containers run unless Options says
// otherwise.
const DefaultImage = "postgres:18-alpine"

// RequireDockerEnv names the environment variable that, set to 1, makes
// NewPair fail instead of skip when no Docker engine answers: for a CI job
// that must not pass by skipping.
const RequireDockerEnv = "WALAPPLY_REQUIRE_DOCKER"

// settings are the server parameters both containers get.
var settings = map[string]string{
	"wal_level":                 "logical",
	"max_replication_slots":     "20",
	"max_wal_senders":           "20",
	"max_prepared_transactions": "20",
	"fsync":                     "off",
}

// Options configures StartPair and NewPair.
type Options struct {
	// SourceImage and TargetImage are the images of the two containers
	// (default DefaultImage): a migration between major versions is a
	// source and a target of different versions.
	SourceImage, TargetImage string
	// Settings are extra server parameters (postgresql.conf names) for
	// both containers, e.g. {"logical_decoding_work_mem": "64kB"} to make
	// the source stream large transactions early.
	Settings map[string]string
	// Customize is passed on to testcontainers for both containers
	// (networks, log consumers, ...).
	Customize []tc.ContainerCustomizer
}

// Pair is a running source and target.
type Pair struct {
	Source, Target *postgres.PostgresContainer
	// SourceURL and TargetURL connect as the superuser to each container's
	// database (postgres URLs, sslmode=disable): ready for apply.Config's
	// Source and Target.
	SourceURL, TargetURL string
}

// StartPair starts a source and a target container in parallel and waits
// until both accept connections. On error, whatever started is terminated.
func StartPair(ctx context.Context, opts Options) (*Pair, error) {
	images := [2]string{opts.SourceImage, opts.TargetImage}
	var (
		wg   sync.WaitGroup
		ctrs [2]*postgres.PostgresContainer
		urls [2]string
		errs [2]error
	)
	for i, role := range []string{"source", "target"} {
		img := images[i]
		if img == "" {
			img = DefaultImage
		}
		wg.Go(func() {
			ctrs[i], urls[i], errs[i] = start(ctx, role, img, opts)
		})
	}
	wg.Wait()
	p := &Pair{Source: ctrs[0], Target: ctrs[1], SourceURL: urls[0], TargetURL: urls[1]}
	if err := errors.Join(errs[:]...); err != nil {
		return nil, errors.Join(err, p.Terminate(context.WithoutCancel(ctx)))
	}
	return p, nil
}

// start runs one container and returns its connection string.
func start(ctx context.Context, role, img string, opts Options) (*postgres.PostgresContainer, string, error) {
	custom := []tc.ContainerCustomizer{
		tc.WithCmdArgs(serverArgs(opts.Settings)...),
		postgres.BasicWaitStrategies(),
	}
	custom = append(custom, opts.Customize...)
	ctr, err := postgres.Run(ctx, img, custom...)
	if err != nil {
		if ctr != nil {
			err = errors.Join(err, ctr.Terminate(context.WithoutCancel(ctx)))
		}
		return nil, "", fmt.Errorf("walapplytc: starting the %s container (%s): %w", role, img, err)
	}
	url, err := ctr.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		return ctr, "", fmt.Errorf("walapplytc: the %s container's connection string: %w", role, err)
	}
	return ctr, url, nil
}

// serverArgs are the postgres command-line arguments for the settings and
// the extra ones, in a stable order (extra ones win).
func serverArgs(extra map[string]string) []string {
	all := map[string]string{}
	for k, v := range settings {
		all[k] = v
	}
	for k, v := range extra {
		all[k] = v
	}
	keys := make([]string, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	args := make([]string, 0, 2*len(keys))
	for _, k := range keys {
		args = append(args, "-c", k+"="+all[k])
	}
	return args
}

// Terminate stops and removes both containers.
func (p *Pair) Terminate(ctx context.Context) error {
	var errs []error
	for _, c := range []*postgres.PostgresContainer{p.Source, p.Target} {
		if c != nil {
			errs = append(errs, c.Terminate(ctx))
		}
	}
	return errors.Join(errs...)
}

// DockerAvailable returns nil when a Docker engine (or another provider
// testcontainers supports) answers, else why not.
func DockerAvailable(ctx context.Context) (err error) {
	defer func() {
		// testcontainers panics on some broken configurations.
		if r := recover(); r != nil {
			err = fmt.Errorf("testcontainers could not reach a container engine: %v", r)
		}
	}()
	provider, err := tc.ProviderDefault.GetProvider()
	if err != nil {
		return fmt.Errorf("no container engine: %w", err)
	}
	defer provider.Close()
	if err := provider.Health(ctx); err != nil {
		return fmt.Errorf("the container engine does not answer: %w", err)
	}
	return nil
}

// NewPair starts a pair for the test and terminates it when the test ends.
// Without a Docker engine the test is skipped, saying so, unless
// RequireDockerEnv is set to 1, which makes it fail.
func NewPair(tb testing.TB, opts Options) *Pair {
	tb.Helper()
	ctx := context.Background()
	if err := DockerAvailable(ctx); err != nil {
		if os.Getenv(RequireDockerEnv) == "1" {
			tb.Fatalf("walapplytc: %v (%s=1 requires Docker)", err, RequireDockerEnv)
		}
		tb.Skipf("walapplytc: skipped, no Docker engine to run PostgreSQL containers in: %v (set %s=1 to fail instead)", err, RequireDockerEnv)
	}
	p, err := StartPair(ctx, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := p.Terminate(context.Background()); err != nil {
			tb.Errorf("walapplytc: terminating the containers: %v", err)
		}
	})
	return p
}
