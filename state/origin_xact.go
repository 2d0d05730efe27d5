package state

import (
	"context"
	"fmt"
	"time"

	"github.com/walapply/walapply/protocol"
)

// XactSetupSQL marks the current target transaction as replaying the source
// transaction that ended at $1 (the end LSN as text, "X/Y") and committed at
// $2 (a timestamptz): its commit, or its PREPARE TRANSACTION, advances the
// session's origin to $1 atomically (and from PostgreSQL 16 on, so does its
// abort: see "Aborts advance the origin" in the package documentation). Run
// it inside every target transaction that applies a source transaction,
// after SessionSetup on the connection, as its last statement before COMMIT.
// Two-phase transactions use the GID-guarded variants below instead.
//
// The origin advance of an applied transaction (DESIGN.md invariant 1) is
// spelled here only: the SQL each path queues, the text form of its
// parameters, and the one rewind that undoes an advance an abort made.
// The statements are constants so that the apply session can prepare them
// once and queue them in its pipelined batches without a round trip of
// their own.
//
// XactSetupSQL also gives the transaction an xid if it has none yet.
// PostgreSQL writes no commit record for a transaction without one, and
// the origin advances only in a commit record: a target transaction that
// wrote nothing (every change filtered out, a streamed transaction with no
// published change, UPDATEs and DELETEs that matched no row, a group whose
// changes compacted to nothing) would commit without moving the origin,
// and the slot would never be confirmed past it. pg_current_xact_id is
// called only when pg_current_xact_id_if_assigned says there is no xid
// (CASE evaluates its branches in order), so a transaction that wrote
// something costs no xid more.
const XactSetupSQL = xactSetupCall + `,
	CASE WHEN pg_catalog.pg_current_xact_id_if_assigned() IS NULL THEN pg_catalog.pg_current_xact_id() END`

// xactSetupCall is the origin advance proper. The two-phase variants below
// use it without XactSetupSQL's xid: PREPARE TRANSACTION assigns one
// itself, and XactSetupIfPreparedSQL runs in an implicit transaction of
// its own whose commit must not advance the origin.
const xactSetupCall = "SELECT pg_catalog.pg_replication_origin_xact_setup($1::pg_catalog.pg_lsn, $2::pg_catalog.timestamptz)"

// XactSetupUnlessPreparedSQL is XactSetupSQL for a transaction about to be
// prepared under GID $3: it sets the origin up unless $3 is prepared
// already. In that case PREPARE TRANSACTION fails on the GID in use, and on
// PostgreSQL 16+ the abort that follows would otherwise advance the origin
// to $1, marking as applied a transaction that is not.
const XactSetupUnlessPreparedSQL = xactSetupCall + `
	WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_prepared_xacts WHERE gid = $3)`

// XactSetupIfPreparedSQL is XactSetupSQL run alone just before COMMIT
// PREPARED or ROLLBACK PREPARED of GID $3 (which cannot run inside a
// transaction block), made only if $3 is prepared: it returns one row when
// it set the origin up (then send the COMMIT or ROLLBACK PREPARED next, on
// the same session) and none when there is nothing to finish.
const XactSetupIfPreparedSQL = xactSetupCall + `
	FROM pg_catalog.pg_prepared_xacts WHERE gid = $3`

// xactResetSQL undoes XactSetupSQL on the session. It must run before a
// transaction that ran XactSetupSQL is rolled back on purpose, and on a
// session whose transaction failed after XactSetupSQL, before that session
// runs anything else; see "Aborts advance the origin" in the package
// documentation.
const xactResetSQL = "SELECT pg_catalog.pg_replication_origin_xact_reset()"

// xactTimeLayout is the text form of XactSetupSQL's $2 (a timestamptz
// PostgreSQL reads whatever its DateStyle).
const xactTimeLayout = "2006-01-02 15:04:05.999999Z07:00"

// AppendXactSetupArgs appends the text-format parameters $1 and $2 of the
// XactSetup*SQL statements to dst: the source transaction's end LSN and its
// commit (or prepare) time.
func AppendXactSetupArgs(dst [][]byte, end protocol.LSN, commitTime time.Time) [][]byte {
	return append(dst, []byte(end.String()), []byte(commitTime.Format(xactTimeLayout)))
}

// xactSetup runs the origin advance proper (xactSetupCall, without
// XactSetupSQL's xid): the current transaction's commit will advance the
// session's origin to end, the source transaction's end LSN, with commit
// time commitTime. The tests of the session variables run it outside a
// transaction block too, where XactSetupSQL's xid would make its own
// implicit transaction's commit advance the origin.
func xactSetup(ctx context.Context, q Querier, end protocol.LSN, commitTime time.Time) error {
	if _, err := q.Exec(ctx, xactSetupCall, end.String(), commitTime); err != nil {
		return fmt.Errorf("state: setting up the replication origin for the transaction ending at %s: %w", end, err)
	}
	return nil
}

// XactReset runs xactResetSQL.
func XactReset(ctx context.Context, q Querier) error {
	if _, err := q.Exec(ctx, xactResetSQL); err != nil {
		return fmt.Errorf("state: resetting the transaction's replication origin: %w", err)
	}
	return nil
}

// RewindOrigin moves origin name back to to, the end LSN of the last
// transaction known applied, if its progress is past it: after a COMMIT or
// PREPARE TRANSACTION failed once XactSetupSQL had run, PostgreSQL 16+ has
// advanced the origin on the abort, and the source would never send the
// failed transaction again. q's session must have the origin set up
// (SessionSetup) and no transaction open; with setup, the origin is set up
// on it again afterwards, else the session is left without it. from is the
// progress found: the origin was moved when from > to.
func RewindOrigin(ctx context.Context, q Querier, name string, to protocol.LSN, setup bool) (from protocol.LSN, err error) {
	from, _, err = OriginProgress(ctx, q, name, false)
	if err != nil {
		return from, err
	}
	if from <= to {
		if !setup {
			return from, SessionReset(ctx, q)
		}
		return from, nil
	}
	if err := SessionReset(ctx, q); err != nil {
		return from, err
	}
	if err := AdvanceOrigin(ctx, q, name, to); err != nil {
		return from, err
	}
	if setup {
		return from, SessionSetup(ctx, q, name)
	}
	return from, nil
}
