package main

import (
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
	logStopped(log.WithLevel(zerolog.FatalLevel), err, "stopped: an error that retrying does not fix")
	return &loggedError{err}
}

// logStopped writes ev, the record of err that stopped the applier, with
// logFatal's fields and msg.
func logStopped(ev *zerolog.Event, err error, msg string) {
	ev.Str("error", printed.Scrub(err.Error()))
	f := apply.FactsOf(err)
	if f.Txn {
		ev.Uint32("xid", f.Xid).Stringer("commit_lsn", f.CommitLSN)
	}
	if f.Operation != "" {
		ev.Str("operation", f.Operation)
	}
	if f.Relation != "" {
		ev.Str("relation", f.Relation)
	}
	if f.SQLState != "" {
		ev.Str("sqlstate", f.SQLState)
	}
	ev.Msg(msg)
}
