package apply_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/testenv"
)

// TestTopologyOriginNoneOldSource: asking a source older than PostgreSQL 16
// for origin = none stops walapply at once with an error that says why and
// what to do, is not retried, and leaves nothing behind on the source (no
// slot, even with --create-slot). Through the Go API and the command line
// (the flag's environment variable, WALAPPLY_ORIGIN).
func TestTopologyOriginNoneOldSource(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		if version >= topoOriginVersion {
			t.Skipf("PostgreSQL %d supports origin = none; the topology tests use it there", version)
		}
		h := newHarness(t, version, nil, nil)
		h.source(`CREATE TABLE items (id int PRIMARY KEY)`, `CREATE PUBLICATION pub FOR TABLE items`)
		h.target(`CREATE TABLE items (id int PRIMARY KEY)`)
		wantParts := []string{"--origin none", "PostgreSQL 16 or later", "--origin any"}
		noSlot := func() {
			t.Helper()
			if slots := h.rows(h.pair.Source, `SELECT slot_name::text FROM pg_replication_slots`); len(slots) != 0 {
				t.Errorf("slots left on the source after the refusal: %q", slots)
			}
		}

		t.Run("api", func(t *testing.T) {
			cfg := h.config("s", "pub")
			cfg.Origin = "none"
			done := make(chan error, 1)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() { done <- apply.Run(ctx, cfg) }()
			var err error
			select {
			case err = <-done:
			case <-time.After(topoCatchUp):
				t.Fatal("apply.Run is still running: the refusal is being retried instead of stopping the run")
			}
			if err == nil {
				t.Fatal("apply.Run accepted origin none from PostgreSQL 15")
			}
			if apply.IsTransient(err) {
				t.Errorf("the refusal is transient: %v", err)
			}
			if !errors.Is(err, protocol.ErrUnsupported) {
				t.Errorf("the refusal %v does not match protocol.ErrUnsupported", err)
			}
			for _, p := range wantParts {
				if !strings.Contains(err.Error(), p) {
					t.Errorf("the refusal %q does not say %q", err, p)
				}
			}
			noSlot()
		})

		t.Run("cli", func(t *testing.T) {
			cmd := exec.Command(walapplyBinary(t), "run", "--source", h.pair.Source.ConnString("postgres"),
				"--target", h.pair.Target.ConnString("postgres"), "--slot", "s", "--create-slot", "--publication", "pub",
				"--log-format", "json")
			cmd.Env = append(os.Environ(), "WALAPPLY_ORIGIN=none")
			done := make(chan struct{})
			var out []byte
			var err error
			go func() { out, err = cmd.CombinedOutput(); close(done) }()
			select {
			case <-done:
			case <-time.After(topoCatchUp):
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("walapply run --origin none is still running against PostgreSQL %d:\n%s", version, out)
			}
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("walapply run with WALAPPLY_ORIGIN=none: %v, want exit status 1; output:\n%s", err, out)
			}
			for _, p := range wantParts {
				if !strings.Contains(string(out), p) {
					t.Errorf("the output does not say %q:\n%s", p, out)
				}
			}
			noSlot()
		})
	})
}
