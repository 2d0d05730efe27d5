package twophase

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Querier runs SQL on the target. *pgx.Conn implements it.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// PrepareSQL returns the statement that prepares the current transaction
// under gid.
func PrepareSQL(gid string) string { return "PREPARE TRANSACTION " + QuoteGID(gid) }

// FinishSQL returns COMMIT PREPARED (commit) or ROLLBACK PREPARED of gid.
// It cannot run inside a transaction block, nor in a pipeline or a
// multi-statement query: send it alone.
func FinishSQL(gid string, commit bool) string {
	if commit {
		return "COMMIT PREPARED " + QuoteGID(gid)
	}
	return "ROLLBACK PREPARED " + QuoteGID(gid)
}

// ErrNoPreparedTransactions is returned by CheckTarget when the target
// cannot prepare transactions.
var ErrNoPreparedTransactions = errors.New("twophase: the target has max_prepared_transactions = 0")

// CheckTarget returns the target's max_prepared_transactions, or an error
// wrapping ErrNoPreparedTransactions that says what to change when it is 0.
func CheckTarget(ctx context.Context, q Querier) (int, error) {
	var n int
	if err := q.QueryRow(ctx, "SELECT pg_catalog.current_setting('max_prepared_transactions')::int").Scan(&n); err != nil {
		return 0, fmt.Errorf("twophase: reading max_prepared_transactions on the target: %w", err)
	}
	if n <= 0 {
		return 0, fmt.Errorf("%w, so it cannot hold prepared transactions: set max_prepared_transactions in the target's postgresql.conf "+
			"to at least the source's (a server restart is needed), or run without --two-phase", ErrNoPreparedTransactions)
	}
	return n, nil
}

// IsPrepared reports whether gid is prepared on the target (in any of its
// databases: GIDs are unique across a cluster).
func IsPrepared(ctx context.Context, q Querier, gid string) (bool, error) {
	var ok bool
	if err := q.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_catalog.pg_prepared_xacts WHERE gid = $1)", gid).Scan(&ok); err != nil {
		return false, fmt.Errorf("twophase: looking up prepared transaction %q on the target: %w", gid, err)
	}
	return ok, nil
}

// Prepared is a transaction prepared on the target, as pg_prepared_xacts
// shows it.
type Prepared struct {
	GID      string
	Prepared time.Time // when it was prepared on the target
	Owner    string
	Database string
	// SourceXid is the source transaction the GID was derived from
	// (GIDModeApplier).
	SourceXid uint32
}

// ListApplier returns the transactions prepared on the target under a
// GIDModeApplier GID of applier, oldest first.
func ListApplier(ctx context.Context, q Querier, applier string) ([]Prepared, error) {
	rows, err := q.Query(ctx, `SELECT gid, prepared, owner::text, database::text FROM pg_catalog.pg_prepared_xacts
		WHERE pg_catalog.starts_with(gid, $1) ORDER BY prepared, gid`, GIDPrefix+applier+"_")
	if err != nil {
		return nil, fmt.Errorf("twophase: listing the prepared transactions of applier %q on the target: %w", applier, err)
	}
	var out []Prepared
	var p Prepared
	_, err = pgx.ForEachRow(rows, []any{&p.GID, &p.Prepared, &p.Owner, &p.Database}, func() error {
		if xid, ok := ParseTargetGID(applier, p.GID); ok {
			p.SourceXid = xid
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("twophase: listing the prepared transactions of applier %q on the target: %w", applier, err)
	}
	return out, nil
}
