package engine

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/protocol"
)

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

// Vague reports whether the target rejected a value whose column (or
// shape) e cannot name yet: Run's retry without grouping then applies the
// transaction change by change and checks it (valuecheck.go).
func Vague(e *TxnError) bool { return e.vague }

// SetCause records what the applier found out about e's cause: vague (see
// Vague) and otherUnique (a duplicate key of another unique index than the
// replica identity key, which the conflict policies do not cover).
func SetCause(e *TxnError, vague, otherUnique bool) { e.vague, e.otherUnique = vague, otherUnique }
