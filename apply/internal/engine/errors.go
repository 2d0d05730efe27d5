package engine

import (
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/protocol"
)

// PermanentError marks an error that retrying cannot fix.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("apply: invalid configuration")

// ErrNotSupported is returned for stream features this build does not apply.
var ErrNotSupported = errors.New("apply: not supported")

// ConflictError stops the applier on a conflict whose policy is error:
// walapply.conflict_error raised it on the target (SQLSTATE WA001).
type ConflictError struct {
	Kind string // update_missing, delete_missing
	Err  *pgconn.PgError
}

func (e *ConflictError) Error() string { return e.Err.Message + " (" + e.Err.Hint + ")" }
func (e *ConflictError) Unwrap() error { return e.Err }

// asConflictError recognises the error walapply.conflict_error raises.
func asConflictError(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "WA001" {
		return err
	}
	kind := ""
	if f := strings.Fields(pgErr.Message); len(f) > 1 {
		kind = f[1]
	}
	return &ConflictError{Kind: kind, Err: pgErr}
}

// SchemaError says the target's schema does not fit what the source sends.
// It is permanent: applying cannot continue until the user changes the
// target.
type SchemaError struct {
	Relation string // schema.name, quoted
	Column   string // empty when the whole table is concerned
	Problem  string
	Hint     string
}

func (e *SchemaError) Error() string {
	var b strings.Builder
	b.WriteString("target table ")
	b.WriteString(e.Relation)
	if e.Column != "" && !strings.HasPrefix(e.Column, "[") {
		b.WriteString(", column ")
		b.WriteString(sqlgen.QuoteIdent(e.Column))
	}
	b.WriteString(": ")
	b.WriteString(e.Problem)
	if e.Hint != "" {
		b.WriteString("; ")
		b.WriteString(e.Hint)
	}
	return b.String()
}

// ErrSourceIsStandby is returned (as a transient error) when the source
// host is a standby whose copy of the slot is synchronised from its
// primary: it cannot be streamed from until the standby is promoted.
var ErrSourceIsStandby = errors.New("apply: the source is a standby with a synchronised copy of the slot")

// Transient reports whether err is worth retrying after reconnecting:
// lost connections, serialization failures, deadlocks, server shutdowns.
// Everything else (schema mismatches, constraint violations, protocol
// violations) is permanent (DESIGN.md invariant 5). apply.IsTransient is
// this rule with the session's own cases (a lock still held, TLS) first.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	var schema *SchemaError
	var perm *PermanentError
	var conflict *ConflictError
	if errors.As(err, &schema) || errors.As(err, &perm) || errors.As(err, &conflict) || errors.Is(err, ErrProtocolOrder) || errors.Is(err, ErrConfig) || errors.Is(err, ErrNotSupported) {
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
		return true // until it is promoted (apply/failover.go)
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
