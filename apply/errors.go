package apply

import (
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/apply/internal/engine"
	"github.com/walapply/walapply/protocol"
)

// ErrProtocolOrder is returned (wrapped) when messages arrive in an order the
// protocol does not allow: DML outside a transaction, a Commit that does not
// match its Begin, an Origin after changes, and so on (DESIGN.md invariant 6).
// The engine's framing checks (internal/engine) return it.
var ErrProtocolOrder = engine.ErrProtocolOrder

// ErrSourceIsStandby is returned (as a transient error) when the source
// host is a standby whose copy of the slot is synchronised from its
// primary: it cannot be streamed from until the standby is promoted.
var ErrSourceIsStandby = errors.New("apply: the source is a standby with a synchronised copy of the slot")

// errLeaseNotReleased: the lock is held for a process that is gone (this
// one's previous session, or a killed process), whose target backend has
// not ended yet. IsTransient retries it.
var errLeaseNotReleased = errors.New("apply: the running-applier lock is still held for a walapply process that is gone; retrying until its target backend ends")

// IsTransient reports whether err is worth retrying after reconnecting:
// lost connections, serialization failures, deadlocks, server shutdowns.
// Everything else (schema mismatches, constraint violations, protocol
// violations) is permanent (DESIGN.md invariant 5).
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, errLeaseNotReleased) { // lease.go
		return true
	}
	var schema *SchemaError
	var perm *PermanentError
	var conflict *ConflictError
	if errors.As(err, &schema) || errors.As(err, &perm) || errors.As(err, &conflict) || errors.Is(err, ErrProtocolOrder) || errors.Is(err, ErrConfig) || errors.Is(err, ErrNotSupported) {
		return false
	}
	if isTLSFailure(err) { // see errdetail.go
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "40001", pgErr.Code == "40P01": // serialization failure, deadlock
			return true
		case strings.HasPrefix(pgErr.Code, "08"): // connection exceptions
			return true
		case pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03": // shutdowns, cannot connect now
			return true
		case pgErr.Code == "53300": // too many connections
			return true
		case pgErr.Code == "55006": // object in use: replication slot active (previous walsender still exiting)
			return true
		case pgErr.Code == "58P01" || pgErr.Code == "58030": // I/O trouble on the server
			return true
		}
		return false
	}
	var decodeErr *protocol.DecodeError
	if errors.As(err, &decodeErr) {
		return false
	}
	if errors.Is(err, protocol.ErrUnsupported) {
		return false // an option the source is too old for (e.g. origin "none" before PostgreSQL 16)
	}
	if errors.Is(err, protocol.ErrStreamEnded) {
		return true // the source shut down or restarted
	}
	if errors.Is(err, ErrSourceIsStandby) {
		return true // until it is promoted (failover.go)
	}
	// Network errors, EOFs and timeouts from a broken connection.
	return pgconn.SafeToRetry(err) || isConnError(err)
}

// isConnError recognises a broken or unreachable connection by the
// errors' types, never by their text (which may quote user data).
func isConnError(err error) bool {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	for _, target := range []error{pgconn.ErrConnClosed, io.EOF, io.ErrUnexpectedEOF, io.ErrClosedPipe, net.ErrClosed,
		syscall.ECONNRESET, syscall.ECONNREFUSED, syscall.EPIPE, syscall.ECONNABORTED, syscall.ETIMEDOUT} {
		if errors.Is(err, target) {
			return true
		}
	}
	return pgconn.Timeout(err)
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
