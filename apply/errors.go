package apply

import (
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"slices"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/protocol"
)

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

// TxnError is a failure while applying one source transaction. It names
// what a PostgreSQL operator needs to act: the relation and operation, the
// source transaction (xid, commit LSN) and what to do.
type TxnError struct {
	Xid       uint32
	CommitLSN protocol.LSN // the source commit's LSN (Begin's final LSN)
	Relation  string       // may be empty
	Op        string       // INSERT, UPDATE, DELETE, TRUNCATE, COMMIT, ...
	Err       error
	// Grouped: earlier source transactions shared the failed target
	// transaction (group commit) and were rolled back with it.
	Grouped bool
	// SkipLSN is the --skip-lsn in effect, which does not name this
	// transaction; SkipSpent says it was ignored as used already.
	SkipLSN   protocol.LSN
	SkipSpent bool
	// vague: the target rejected a value whose column (or shape) the
	// error cannot name yet: Run's retry without grouping applies the
	// transaction change by change and checks it (valuecheck.go).
	vague bool
	// otherUnique: a duplicate key of a unique index other than the
	// replica identity key, which the conflict policies do not cover.
	otherUnique bool
}

// retryUngrouped reports whether Run retries after err with grouping and
// compaction off up to the failed transaction (te, set from err's chain):
// once, for a failure inside a group (which rolled back the transactions
// before it too) or a vague one, so that the error stops exactly at that
// transaction and names what it can. A vague failure at a transaction
// before the one the last retry stopped at (a group's multi-row
// statements name its last transaction; applied one by one, an earlier
// one failed) is retried once more, to check that transaction's values
// (valuecheck.go).
func (c *Config) retryUngrouped(err error, te **TxnError) bool {
	if !errors.As(err, te) || (*te).CommitLSN == c.noGroupThrough {
		return false
	}
	return ((*te).Grouped || (*te).vague) && c.noGroupThrough < (*te).CommitLSN || (*te).vague
}

func (e *TxnError) Error() string {
	var b strings.Builder
	b.WriteString("applying source transaction ")
	fmt.Fprintf(&b, "%d (commit LSN %s)", e.Xid, e.CommitLSN)
	if e.Op != "" {
		b.WriteString(": ")
		b.WriteString(e.Op)
	}
	if e.Relation != "" {
		b.WriteString(" on ")
		b.WriteString(e.Relation)
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	if d := keyDetail(e.Err); d != "" {
		b.WriteString(": ")
		b.WriteString(d)
	}
	if h := e.hint(); h != "" {
		b.WriteString(" (")
		b.WriteString(h)
		b.WriteString(")")
	}
	if e.SkipLSN != 0 {
		state := "did not match this transaction"
		if e.SkipSpent {
			state = "is spent (already used, or passed without a match) and ignored"
		}
		fmt.Fprintf(&b, "; --skip-lsn %s %s: to skip this transaction, give --skip-lsn %s", e.SkipLSN, state, e.CommitLSN)
	}
	return b.String()
}

func (e *TxnError) Unwrap() error { return e.Err }

// keyDetail is PostgreSQL's DETAIL of a key violation (duplicate key,
// missing referenced key): "Key (id)=(1) already exists.", which names the
// row. Other errors' details may hold whole rows and are left out.
func keyDetail(err error) string {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || (pgErr.Code != "23505" && pgErr.Code != "23503") {
		return ""
	}
	return pgErr.Detail
}

// hint is hintFor's advice, with the ways out of a duplicate key filled
// in for this transaction: remove the row, skip the transaction, or let
// the conflict policy of its kind (insert_exists, update_exists) decide.
func (e *TxnError) hint() string {
	var pgErr *pgconn.PgError
	if !errors.As(e.Err, &pgErr) || pgErr.Code != "23505" {
		return hintFor(e.Err)
	}
	kind := ""
	switch e.Op {
	case OpInsert, OpCopy:
		kind = ConflictInsertExists
	case OpUpdate:
		kind = ConflictUpdateExists
	}
	var ways []string
	ways = append(ways, "remove or change the target's row, then restart")
	if e.CommitLSN != 0 && e.SkipLSN == 0 { // with a --skip-lsn in effect, Error says it below
		ways = append(ways, fmt.Sprintf("restart with --skip-lsn %s to skip this whole transaction", e.CommitLSN))
	}
	note := ""
	if e.otherUnique {
		note = " (--on-conflict does not apply: this is another unique index than the replica identity key, which the conflict policies work on)"
		kind = ""
	}
	if kind != "" {
		ways = append(ways, fmt.Sprintf("restart with --on-conflict %s=skip to keep the target's row, or %s=apply to overwrite it with the source's", kind, kind))
	}
	return "a row with this key already exists on the target; nothing of this transaction was applied: " + strings.Join(ways, "; or ") + note
}

// detailKeyRE reads the columns of a key violation's DETAIL: `Key (a,
// b)=(1, 2) already exists.`
var detailKeyRE = regexp.MustCompile(`^Key \((.*?)\)=\(`)

// isOtherUnique reports whether a duplicate key error names other columns
// than rel's replica identity key (a unique index the conflict policies,
// which work on that key, do not cover). Unknown is false.
func isOtherUnique(rel *relmap.Entry, err error) bool {
	var pgErr *pgconn.PgError
	if rel == nil || !errors.As(err, &pgErr) || pgErr.Code != "23505" {
		return false
	}
	m := detailKeyRE.FindStringSubmatch(pgErr.Detail)
	if m == nil {
		return false
	}
	var key []string
	for _, c := range rel.Rel.Columns {
		if c.IsKey() {
			key = append(key, c.Name)
		}
	}
	named := strings.Split(m[1], ", ")
	for i := range named {
		named[i] = strings.ReplaceAll(strings.Trim(named[i], `"`), `""`, `"`)
	}
	slices.Sort(key)
	slices.Sort(named)
	return len(key) > 0 && !slices.Equal(key, named)
}

// hintFor suggests what to do about a target error.
func hintFor(err error) string {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return ""
	}
	switch pgErr.Code {
	case "23505":
		return "a row with this key already exists on the target: remove it or resolve the conflict, then restart; nothing of this transaction was applied"
	case "23502", "23514", "23503", "22001", "22003", "22P02", "42804":
		return "the target rejects the source's value: make the target column accept it, then restart; nothing of this transaction was applied"
	case "42P01", "42703":
		return "the target's schema does not match the source's: fix it, then restart"
	case "42501":
		return "the target role lacks a privilege: grant it, then restart"
	}
	return ""
}

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
