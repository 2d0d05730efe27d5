package apply_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/internal/testutil"
)

// TestConnectTimeout: a first connection that never succeeds is retried
// visibly (each retry logged with the time spent and the next attempt),
// and with a connect timeout Run, and walapply run, stop with a permanent
// error saying what to check. Timings are not asserted tightly: only that
// it stops, long before the test's bound.
func TestConnectTimeout(t *testing.T) {
	t.Parallel()
	dead := func() string {
		return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", deadPort(t))
	}
	cfg := apply.Config{Source: dead(), Target: dead(), Slot: "s", Publications: []string{"p"}}

	t.Run("retried for ever, visibly", func(t *testing.T) {
		var log testutil.LogBuffer
		c := cfg
		c.Logger = zerolog.New(&log)
		ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		defer cancel()
		if err := apply.Run(ctx, c); err != nil {
			t.Fatalf("Run without a connect timeout returned %v before its context ended", err)
		}
		out := log.String()
		if n := strings.Count(out, "transient error; cannot connect yet, retrying"); n < 2 || !strings.Contains(out, `"elapsed_seconds":`) || !strings.Contains(out, `"retry_in_seconds":`) {
			t.Errorf("want every retry logged with elapsed_seconds and retry_in_seconds; got %d retries in:\n%s", n, out)
		}
	})

	t.Run("Run gives up", func(t *testing.T) {
		c := cfg
		c.ConnectTimeout = time.Second
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		start := time.Now()
		err := apply.Run(ctx, c)
		var pe *apply.PermanentError
		if ctx.Err() != nil || !errors.As(err, &pe) || !strings.Contains(err.Error(), "no connection within the connect timeout (--connect-timeout 1s") ||
			!strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), "nothing listens there: check that the server runs") {
			t.Fatalf("Run with a connect timeout of 1s: %v after %s; want a PermanentError naming the timeout and the refusal", err, time.Since(start))
		}
		t.Logf("after %s: %v", time.Since(start).Round(time.Millisecond), err)
	})

	t.Run("walapply run exits", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, walapplyBinary(t), "run", "--source", cfg.Source, "--target", cfg.Target,
			"--slot", "s", "--publication", "p", "--connect-timeout", "2s", "--log-format", "json")
		start := time.Now()
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if ctx.Err() != nil || !errors.As(err, &ee) || ee.ExitCode() == 0 ||
			!strings.Contains(string(out), "no connection within the connect timeout (--connect-timeout 2s") {
			t.Fatalf("walapply run --connect-timeout 2s: %v after %s; output:\n%s", err, time.Since(start), out)
		}
		t.Logf("exit %d after %s", ee.ExitCode(), time.Since(start).Round(time.Millisecond))
	})
}
