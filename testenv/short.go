package testenv

import (
	"errors"
	"testing"
)

// ShortSkipReason is the reason every test that needs PostgreSQL gives
// when `go test -short` skips it.
const ShortSkipReason = "needs PostgreSQL: integration test, skipped by -short"

// SkipShort skips tb under `go test -short`. It is the one place that
// decides which tests -short runs: NewCluster, NewPair and NewStandby call
// it, so every test that needs a server skips without a check of its own;
// a test that does expensive work before it starts one (building the
// walapply binary, a long setup) or that spawns servers or processes by
// other means calls it first. `go test -short ./...` thus runs the tests
// that need no server, and nothing it runs starts a PostgreSQL (Start
// refuses: errShortStart).
func SkipShort(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip(ShortSkipReason)
	}
}

// errShortStart is Start's error in a test binary run with -short: a test
// reached a server without SkipShort, which is a bug in the test.
var errShortStart = errors.New("testenv: starting a PostgreSQL server under go test -short: the test must call testenv.SkipShort first (NewCluster and NewPair do)")

// shortRun reports whether this is a test binary run with -short (never
// true in a program such as the demo or the benchmark harness).
func shortRun() bool { return testing.Testing() && testing.Short() }
