package main

import (
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/rs/zerolog"
	"github.com/walapply/walapply/apply"
)

// loggedError is an error the command has already written to its log as
// the last record (logFatal): main exits 1 without printing it again.
type loggedError struct{ err error }

func (e *loggedError) Error() string { return e.err.Error() }
func (e *loggedError) Unwrap() error { return e.err }

// logFatal writes the error that stops walapply run as one log record at
// level fatal, so that a JSON log has it as one parseable line: the text
// under "error", and what an operator acts on as fields of their own when
// the error says them: the relation (schema.name, unquoted), the
// operation, the source transaction's xid and commit LSN (the value for
// --skip-lsn), and the SQLSTATE of the target's error. The operation is
// spelled as SQL spells it (INSERT, UPDATE, ..., COMMIT).
func logFatal(log zerolog.Logger, err error) error {
	ev := log.WithLevel(zerolog.FatalLevel).Str("error", printed.Scrub(err.Error()))
	relation := ""
	var te *apply.TxnError
	if errors.As(err, &te) {
		ev.Uint32("xid", te.Xid).Stringer("commit_lsn", te.CommitLSN)
		if te.Op != "" {
			ev.Str("operation", strings.ToUpper(te.Op)) // one spelling: INSERT, not Insert
		}
		relation = te.Relation
	}
	var se *apply.SchemaError
	if relation == "" && errors.As(err, &se) {
		relation = se.Relation
	}
	if relation != "" {
		ev.Str("relation", plainRelation(relation))
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		ev.Str("sqlstate", pgErr.Code)
	}
	ev.Msg("stopped: an error that retrying does not fix")
	return &loggedError{err}
}

// plainRelation turns a quoted qualified name ("public"."My Table", as
// apply's errors write it) into the plain form log fields use (public.My
// Table). Anything else is returned as it is.
func plainRelation(q string) string {
	var parts []string
	rest := q
	for rest != "" {
		if rest[0] != '"' {
			return q
		}
		var b strings.Builder
		i := 1
		for ; i < len(rest); i++ {
			if rest[i] == '"' {
				if i+1 < len(rest) && rest[i+1] == '"' {
					b.WriteByte('"')
					i++
					continue
				}
				break
			}
			b.WriteByte(rest[i])
		}
		if i >= len(rest) {
			return q // unterminated
		}
		parts = append(parts, b.String())
		rest = rest[i+1:]
		if rest != "" {
			if rest[0] != '.' {
				return q
			}
			rest = rest[1:]
		}
	}
	return strings.Join(parts, ".")
}
