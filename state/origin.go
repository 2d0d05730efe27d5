package state

import (
	"context"
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walapply/walapply/protocol"
)

// Querier runs SQL on the target. *pgx.Conn and pgx.Tx implement it.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// originNamePrefix starts the name of every origin walapply creates, so that
// an operator can tell them from a subscription's pg_<oid> origins.
const originNamePrefix = "walapply_"

// MaxOriginNameLen bounds origin names to the length of an identifier
// (NAMEDATALEN - 1). PostgreSQL stores origin names as text and would take
// longer ones, but slot and subscription names, which an operator reads next
// to them, are limited to 63 bytes, and so are they here.
const MaxOriginNameLen = 63

// OriginName returns the name of applier's replication origin:
// originNamePrefix followed by the applier's name. The name must be non-empty
// UTF-8 without control characters, and the whole origin name at most
// MaxOriginNameLen bytes.
func OriginName(applier string) (string, error) {
	if applier == "" {
		return "", errors.New("state: the applier name is empty")
	}
	if !utf8.ValidString(applier) {
		return "", fmt.Errorf("state: applier name %q is not valid UTF-8", applier)
	}
	for _, r := range applier {
		if unicode.IsControl(r) {
			return "", fmt.Errorf("state: applier name %q contains a control character", applier)
		}
	}
	name := originNamePrefix + applier
	if len(name) > MaxOriginNameLen {
		return "", fmt.Errorf("state: applier name %q is too long: its origin name %q has %d bytes, at most %d are allowed (the applier name at most %d)",
			applier, name, len(name), MaxOriginNameLen, MaxOriginNameLen-len(originNamePrefix))
	}
	return name, nil
}

// EnsureOrigin creates the replication origin name unless it exists. It is
// idempotent and safe against a concurrent EnsureOrigin of the same name in
// another session (the loser of the race sees the winner's origin). Call it
// outside a transaction block: a lost race aborts the current transaction.
func EnsureOrigin(ctx context.Context, q Querier, name string) error {
	exists, err := originExists(ctx, q, name)
	if err != nil {
		return err
	}
	if exists {
		return nil
	}
	_, err = q.Exec(ctx, "SELECT pg_catalog.pg_replication_origin_create($1)", name)
	if err == nil {
		return nil
	}
	// pg_replication_origin_create locks pg_replication_origin, so a
	// concurrent creator waits for the winner to commit and then fails on
	// the unique name: unique_violation, or duplicate_object where the
	// server checks the name first.
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "23505" || pgErr.Code == "42710") {
		if exists, err2 := originExists(ctx, q, name); err2 == nil && exists {
			return nil
		}
	}
	return fmt.Errorf("state: creating replication origin %q: %w", name, err)
}

func originExists(ctx context.Context, q Querier, name string) (bool, error) {
	var exists bool
	err := q.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_replication_origin WHERE roname = $1)", name).Scan(&exists)
	if err != nil {
		return false, fmt.Errorf("state: looking up replication origin %q: %w", name, err)
	}
	return exists, nil
}

// DropOrigin drops the replication origin name if it exists. It fails while a
// session has the origin set up.
func DropOrigin(ctx context.Context, q Querier, name string) error {
	_, err := q.Exec(ctx, `SELECT pg_catalog.pg_replication_origin_drop(roname)
		FROM pg_catalog.pg_replication_origin WHERE roname = $1`, name)
	if err != nil {
		return fmt.Errorf("state: dropping replication origin %q: %w", name, err)
	}
	return nil
}

// OriginProgress returns the source LSN up to which the origin's
// transactions have been committed on the target. With flush, the target
// first flushes its WAL up to the commit of the origin's latest transaction,
// so the position returned is durable and may be confirmed to the source
// (FlushTracker.Durable); without flush it may include commits still in the
// target's WAL buffers. exists is false if there is no such origin; an
// origin that was never advanced has progress InvalidLSN.
//
// The target's replication origin is walapply's durable progress (DESIGN.md
// invariant 1): every target transaction that applies a source transaction
// advances it inside that same transaction, so the origin's progress and the
// applied data commit or vanish together.
//
// The functions here need a role that may call the pg_replication_origin_*
// functions: a superuser, or one granted EXECUTE on them.
func OriginProgress(ctx context.Context, q Querier, name string, flush bool) (lsn protocol.LSN, exists bool, err error) {
	var text *string
	err = q.QueryRow(ctx, `SELECT pg_catalog.pg_replication_origin_progress(roname, $2)::text
		FROM pg_catalog.pg_replication_origin WHERE roname = $1`, name, flush).Scan(&text)
	if errors.Is(err, pgx.ErrNoRows) {
		return protocol.InvalidLSN, false, nil
	}
	if err != nil {
		return protocol.InvalidLSN, false, fmt.Errorf("state: reading progress of replication origin %q: %w", name, err)
	}
	if text == nil {
		return protocol.InvalidLSN, true, nil
	}
	lsn, err = protocol.ParseLSN(*text)
	if err != nil {
		return protocol.InvalidLSN, true, fmt.Errorf("state: reading progress of replication origin %q: %w", name, err)
	}
	return lsn, true, nil
}

// SessionSetup marks the session as replaying changes from origin name:
// every change it makes carries the origin (so a peer subscribing with
// origin = none ignores them, DESIGN.md invariant 8), and XactSetupSQL can
// advance the origin. An origin can be set up in one session at a time; a
// second session fails with "replication origin ... is already active".
func SessionSetup(ctx context.Context, q Querier, name string) error {
	if _, err := q.Exec(ctx, "SELECT pg_catalog.pg_replication_origin_session_setup($1)", name); err != nil {
		return fmt.Errorf("state: setting up replication origin %q on the session: %w", name, noOriginSlot(ctx, q, name, err))
	}
	return nil
}

// SessionReset undoes SessionSetup, so that another session can set the
// origin up. Without an origin set up on the session it does nothing.
func SessionReset(ctx context.Context, q Querier) error {
	_, err := q.Exec(ctx, `SELECT pg_catalog.pg_replication_origin_session_reset()
		WHERE pg_catalog.pg_replication_origin_session_is_setup()`)
	if err != nil {
		return fmt.Errorf("state: resetting the session's replication origin: %w", err)
	}
	return nil
}

// AdvanceOrigin sets the progress of origin name to lsn, outside any replayed
// transaction: the initial copy uses it to make streaming start at the point
// the copy's snapshot corresponds to. It may move the progress backwards.
// The change is not transactional: it takes effect at once and stays even if
// the surrounding transaction rolls back (checked on PostgreSQL 15 and 18),
// so call it only once the data it vouches for is committed. It fails while
// another session has the origin set up.
func AdvanceOrigin(ctx context.Context, q Querier, name string, lsn protocol.LSN) error {
	_, err := q.Exec(ctx, "SELECT pg_catalog.pg_replication_origin_advance($1, $2::pg_catalog.pg_lsn)", name, lsn.String())
	if err != nil {
		return fmt.Errorf("state: advancing replication origin %q to %s: %w", name, lsn, noOriginSlot(ctx, q, name, err))
	}
	return nil
}
