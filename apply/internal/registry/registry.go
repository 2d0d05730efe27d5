// Package registry keeps an applier's row in walapply.appliers on the
// target: a new applier is recorded, and a start of a known one is checked
// against the replication slot it is bound to (DESIGN.md invariant 9),
// since another slot begins somewhere else in the source's history and
// streaming it from the origin's progress would skip or repeat changes. It
// is apart from apply so that these refusals are decided and tested on
// their own; it talks to the target only through Conn.
package registry

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/rs/zerolog"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/state"
)

// Conn is what the registry needs of the target: the session's control
// connection (a *pgx.Conn) in walapply, a fake in the tests.
type Conn interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// OneShot is the query mode of the statements a start runs once on the
// control connection (the registry, the lease, the identity checks): one
// round trip each, where pgx's default (prepare and cache) spends a first
// one preparing a statement that never runs again. Parameters go as text
// for the server to type, as in SQL written by hand.
const OneShot = pgx.QueryExecModeExec

// ErrWrongSlot is returned when a start names another slot than the one the
// applier is bound to (DESIGN.md invariant 9).
var ErrWrongSlot = errors.New("apply: slot does not match this applier's recorded slot")

// ErrOriginTaken is returned when a new applier's replication origin
// already holds progress that no applier of this database recorded.
var ErrOriginTaken = errors.New("apply: the applier's replication origin belongs to another applier")

// Applier is what a start records of its applier.
type Applier struct {
	Name         string   // --name, the row's key
	Slot         string   // --slot
	Publications []string // --publication; may change from one start to the next
	Origin       string   // the replication origin on the target
}

// Register records a on the target, or checks that the slot is the one
// recorded. The source itself (its system identifier and timeline history:
// pointing a replica at another cluster must not silently mix data, its
// LSNs would mean nothing against the origin's progress) is checked by
// apply's preflight (checkSourceHistory, timeline.go). The publications
// may change from one start to the next, as with ALTER SUBSCRIPTION ... SET
// PUBLICATION.
//
// It only reads before it has checked everything, so a refused start
// leaves the row as it was. The refusals wrap ErrWrongSlot or
// ErrOriginTaken, which retrying cannot fix.
func Register(ctx context.Context, conn Conn, a Applier, sys protocol.SystemInfo, log zerolog.Logger) error {
	var slot, confirmed string
	var copying bool
	err := conn.QueryRow(ctx, `SELECT slot_name, coalesce(confirmed_lsn::text, ''),
			EXISTS (SELECT FROM walapply.copies c WHERE c.applier = a.name)
		FROM walapply.appliers a WHERE name = $1`, OneShot, a.Name).Scan(&slot, &confirmed, &copying)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		if err := checkOriginUnowned(ctx, conn, a); err != nil {
			return err
		}
		_, err = conn.Exec(ctx, `INSERT INTO walapply.appliers (name, slot_name, publications, origin_name, source_system_id, source_timeline, confirmed_lsn)
			VALUES ($1, $2, $3, $4, $5, $6, '0/0') ON CONFLICT (name) DO NOTHING`, OneShot,
			a.Name, a.Slot, a.Publications, a.Origin, sys.SystemID, sys.Timeline)
		if err != nil {
			return fmt.Errorf("recording applier %q in walapply.appliers on the target: %w", a.Name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("reading applier %q from walapply.appliers on the target: %w", a.Name, err)
	}
	if slot != a.Slot {
		// An applier that never streamed nor copied (a start that failed
		// before, with a mistyped --slot, say) holds nothing of its slot:
		// its binding is empty and moves with the next start.
		progress, _, err := state.OriginProgress(ctx, conn, a.Origin, false)
		if err != nil {
			return err
		}
		if confirmed == "0/0" && progress == protocol.InvalidLSN && !copying {
			log.Info().Str("slot", a.Slot).Str("previous_slot", slot).Msg("the applier never streamed from its previous slot; binding it to this one")
			return update(ctx, conn, a, sys, `, slot_name = $4`, a.Slot)
		}
		return fmt.Errorf("%w: applier %q is bound to replication slot %q, not %q: its progress on the target (origin %q) counts in that slot's changes, "+
			"and streaming another slot from it would skip or repeat changes; run with --slot %s to continue it, "+
			"or choose another --name for a new applier on slot %q (remove the old one first with walapply drop --name %s if it is to go)",
			ErrWrongSlot, a.Name, slot, a.Slot, a.Origin, slot, a.Slot, a.Name)
	}
	return update(ctx, conn, a, sys, "")
}

// update records a start of a registered applier: its publications and
// the source's timeline, and whatever set (an SQL fragment with
// parameters from $4 on) adds.
func update(ctx context.Context, conn Conn, a Applier, sys protocol.SystemInfo, set string, args ...any) error {
	_, err := conn.Exec(ctx, `UPDATE walapply.appliers SET publications = $2, source_timeline = $3, updated_at = now()`+set+` WHERE name = $1`,
		append([]any{OneShot, a.Name, a.Publications, sys.Timeline}, args...)...)
	if err != nil {
		return fmt.Errorf("updating applier %q in walapply.appliers on the target: %w", a.Name, err)
	}
	return nil
}

// checkOriginUnowned refuses a new applier (no row in this database's
// walapply.appliers) whose origin already has progress. Replication origins
// belong to the whole target cluster, walapply.appliers to one database: an
// applier of the same name in another database of the cluster (or one whose
// row was deleted by hand) owns that progress, and streaming this
// applier's slot from it would skip or repeat changes.
func checkOriginUnowned(ctx context.Context, conn Conn, a Applier) error {
	progress, _, err := state.OriginProgress(ctx, conn, a.Origin, false)
	if err != nil {
		return err
	}
	if progress == protocol.InvalidLSN {
		return nil
	}
	var db string
	if err := conn.QueryRow(ctx, `SELECT pg_catalog.current_database()`, OneShot).Scan(&db); err != nil {
		return fmt.Errorf("reading the target's database name: %w", err)
	}
	return fmt.Errorf("%w: replication origin %q already has progress %s, but database %q has no applier %q: "+
		"origins are shared by every database of a PostgreSQL cluster, so it belongs to an applier of that name in another database of the target cluster "+
		"(or to one whose walapply.appliers row was deleted); choose another --name for this one",
		ErrOriginTaken, a.Origin, progress, db, a.Name)
}
