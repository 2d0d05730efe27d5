package apply

import (
	"errors"

	"github.com/walapply/walapply/apply/internal/engine"
)

// ErrProtocolOrder is returned (wrapped) when messages arrive in an order the
// protocol does not allow: DML outside a transaction, a Commit that does not
// match its Begin, an Origin after changes, and so on (DESIGN.md invariant 6).
// The engine's framing checks (internal/engine) return it.
var ErrProtocolOrder = engine.ErrProtocolOrder

// ErrSourceIsStandby is returned (as a transient error) when the source
// host is a standby whose copy of the slot is synchronised from its
// primary: it cannot be streamed from until the standby is promoted.
var ErrSourceIsStandby = engine.ErrSourceIsStandby

// errLeaseNotReleased: the lock is held for a process that is gone (this
// one's previous session, or a killed process), whose target backend has
// not ended yet. IsTransient retries it.
var errLeaseNotReleased = errors.New("apply: the running-applier lock is still held for a walapply process that is gone; retrying until its target backend ends")

// IsTransient reports whether err is worth retrying after reconnecting:
// lost connections, serialization failures, deadlocks, server shutdowns.
// Everything else (schema mismatches, constraint violations, protocol
// violations) is permanent (DESIGN.md invariant 5). The rule is
// engine.Transient's, with the session's two cases around it: the lock of
// a gone process (errLeaseNotReleased) is waited out, and a TLS failure,
// which pgconn wraps as a retryable connection error, is not.
func IsTransient(err error) bool {
	if errors.Is(err, errLeaseNotReleased) { // lease.go
		return true
	}
	return err != nil && engine.Transient(err) && !isTLSFailure(err) // errdetail.go
}

// asPermanent gives an error that IsTransient calls permanent a
// PermanentError in its chain, so that a caller of Run or Start tells every
// permanent error by one test (errors.As with a *PermanentError target),
// whatever its class: a SchemaError, a ConflictError, a TxnError around a
// constraint violation, ErrConfig, a TLS failure, ... The text is
// unchanged. Transient errors, nil and errors that carry one already are
// returned as they are.
func asPermanent(err error) error {
	var pe *PermanentError
	if err == nil || IsTransient(err) || errors.As(err, &pe) {
		return err
	}
	return &PermanentError{Err: err}
}
