package engine

import (
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/apply/internal/sqlgen"
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

// AsConflictError recognises the error walapply.conflict_error raises.
func AsConflictError(err error) error {
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
