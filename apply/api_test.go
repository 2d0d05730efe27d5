package apply

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/apply/internal/engine"
	"github.com/walapply/walapply/protocol"
)

// TestPermanentClasses: every class of error IsTransient calls permanent
// leaves Run with a PermanentError in its chain (errors.As with a pointer
// target), its text unchanged; transient errors do not get one.
func TestPermanentClasses(t *testing.T) {
	pg := func(code string) error { return &pgconn.PgError{Severity: "ERROR", Code: code, Message: "m"} }
	permanent := map[string]error{
		"schema":            &SchemaError{Relation: `"public"."t"`, Problem: "the target table does not exist"},
		"txn around schema": &TxnError{Op: OpInsert, Relation: `"public"."t"`, Err: &SchemaError{Relation: `"public"."t"`, Problem: "missing"}},
		"conflict":          &ConflictError{Kind: ConflictUpdateExists, Err: &pgconn.PgError{Code: "WA001", Message: "conflict update_exists"}},
		"duplicate key":     &TxnError{Op: OpInsert, Err: pg("23505")},
		"undefined table":   pg("42P01"),
		"privilege":         pg("42501"),
		"value":             fmt.Errorf(`column "v" (integer on the target): %w`, pg("22P02")),
		"protocol order":    engine.OrderError("Commit without Begin"),
		"config":            fmt.Errorf("%w: no slot", ErrConfig),
		"not supported":     fmt.Errorf("%w: two-phase", ErrNotSupported),
		"wrong source":      fmt.Errorf("%w: system id", ErrWrongSource),
		"wrong slot":        ErrWrongSlot,
		"origin taken":      ErrOriginTaken,
		"slot ahead":        ErrSlotAhead,
		"sequences missing": ErrSequencesMissing,
		"decode":            &protocol.DecodeError{Message: protocol.MessageTypeInsert, Field: "tuple", Err: errors.New("short")},
		"source too old":    fmt.Errorf("origin none: %w", protocol.ErrUnsupported),
		"already permanent": &PermanentError{Err: errors.New("slot missing")},
	}
	permanent["tls"] = fmt.Errorf("connecting: %w", x509.UnknownAuthorityError{}) // pgconn wraps it so
	for name, err := range permanent {
		if IsTransient(err) {
			t.Errorf("%s: IsTransient is true; the table is wrong", name)
			continue
		}
		wrapped := fmt.Errorf("during a session: %w", err)
		got := asPermanent(wrapped)
		var pe *PermanentError
		if !errors.As(got, &pe) {
			t.Errorf("%s: no PermanentError in the chain of %v", name, got)
		}
		if got.Error() != wrapped.Error() {
			t.Errorf("%s: the text changed: %q, was %q", name, got, wrapped)
		}
		if !errors.Is(got, err) {
			t.Errorf("%s: the original error is no longer in the chain", name)
		}
	}
	for name, err := range map[string]error{
		"refused":   fmt.Errorf("connecting: %w", syscall.ECONNREFUSED),
		"deadlock":  pg("40P01"),
		"shutdown":  pg("57P01"),
		"no answer": nil,
	} {
		var pe *PermanentError
		if got := asPermanent(err); got != err || errors.As(got, &pe) {
			t.Errorf("%s: a transient error became %#v", name, got)
		}
	}
	// Through Run: a configuration error.
	err := Run(context.Background(), Config{})
	var pe *PermanentError
	if !errors.Is(err, ErrConfig) || !errors.As(err, &pe) {
		t.Errorf("Run without a configuration: %v; want ErrConfig as a PermanentError", err)
	}
}

// TestStopContextBounded: StopContext returns when its context ends, even
// if the applier has not stopped, saying so; Stop still waits.
func TestStopContextBounded(t *testing.T) {
	cancelled := false
	r := &Runner{cancel: func() { cancelled = true }, done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := r.StopContext(ctx)
	if !cancelled || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "not stopped") {
		t.Fatalf("StopContext on an applier that does not stop: %v (cancelled %v); want the deadline", err, cancelled)
	}
	r.err = errors.New("the run's error")
	close(r.done)
	if err := r.StopContext(context.Background()); err != r.err {
		t.Errorf("StopContext once stopped: %v, want Run's error", err)
	}
	if err := r.Stop(); err != r.err {
		t.Errorf("Stop once stopped: %v, want Run's error", err)
	}
}
