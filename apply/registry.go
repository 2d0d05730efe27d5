package apply

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/internal/secret"
	"github.com/walapply/walapply/migrations"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/state"
)

// prepareTarget brings the target's walapply schema up to date on conn
// (the session's control connection): one query when it already is, a
// few round trips when it is not (migrations.UpConn).
func prepareTarget(ctx context.Context, conn *pgx.Conn, cfg *Config) error {
	if err := migrations.UpConn(ctx, conn); err != nil {
		return fmt.Errorf("migrating the walapply schema on the target: %w", secret.Error(err, cfg.Target))
	}
	return nil
}

// oneShot is the query mode of the statements a start runs once on the
// control connection (the registry, the lease, the identity checks): one
// round trip each, where pgx's default (prepare and cache) spends a first
// one preparing a statement that never runs again. Parameters go as text
// for the server to type, as in SQL written by hand.
const oneShot = pgx.QueryExecModeExec

// ErrWrongSource is returned when the source is not the cluster whose
// changes the target's origin progress belongs to.
var ErrWrongSource = errors.New("apply: source does not match this applier's recorded source")

// ErrWrongSlot is returned when a start names another slot than the one the
// applier is bound to (DESIGN.md invariant 9).
var ErrWrongSlot = errors.New("apply: slot does not match this applier's recorded slot")

// registerApplier records this applier on the target, or checks that the
// slot is the one recorded: another slot begins somewhere else in the
// source's history, so streaming it from the origin's progress would skip
// (or repeat) whatever lies between. The source itself (its system
// identifier and timeline history: pointing a replica at another cluster
// must not silently mix data, its LSNs would mean nothing against the
// origin's progress) is checked by the preflight (checkSourceHistory,
// timeline.go). The publications may change from one
// start to the next, as with ALTER SUBSCRIPTION ... SET PUBLICATION.
//
// It only reads before it has checked everything, so a refused start leaves
// the row as it was. It runs before the slot is looked up or created, so a
// start refused for naming another slot creates no slot either.
func registerApplier(ctx context.Context, conn *pgx.Conn, cfg *Config, origin string, sys protocol.SystemInfo) error {
	var slot, confirmed string
	var copying bool
	err := conn.QueryRow(ctx, `SELECT slot_name, coalesce(confirmed_lsn::text, ''),
			EXISTS (SELECT FROM walapply.copies c WHERE c.applier = a.name)
		FROM walapply.appliers a WHERE name = $1`, oneShot, cfg.Name).Scan(&slot, &confirmed, &copying)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		if err := checkOriginUnowned(ctx, conn, cfg, origin); err != nil {
			return err
		}
		_, err = conn.Exec(ctx, `INSERT INTO walapply.appliers (name, slot_name, publications, origin_name, source_system_id, source_timeline, confirmed_lsn)
			VALUES ($1, $2, $3, $4, $5, $6, '0/0') ON CONFLICT (name) DO NOTHING`, oneShot,
			cfg.Name, cfg.Slot, cfg.Publications, origin, sys.SystemID, sys.Timeline)
		if err != nil {
			return fmt.Errorf("recording applier %q in walapply.appliers on the target: %w", cfg.Name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("reading applier %q from walapply.appliers on the target: %w", cfg.Name, err)
	}
	if slot != cfg.Slot {
		// An applier that never streamed nor copied (a start that failed
		// before, with a mistyped --slot, say) holds nothing of its slot:
		// its binding is empty and moves with the next start.
		progress, _, err := state.OriginProgress(ctx, conn, origin, false)
		if err != nil {
			return err
		}
		if confirmed == "0/0" && progress == protocol.InvalidLSN && !copying {
			cfg.Logger.Info().Str("slot", cfg.Slot).Str("previous_slot", slot).Msg("the applier never streamed from its previous slot; binding it to this one")
			return updateApplier(ctx, conn, cfg, sys, `, slot_name = $4`, cfg.Slot)
		}
		return &PermanentError{fmt.Errorf("%w: applier %q is bound to replication slot %q, not %q: its progress on the target (origin %q) counts in that slot's changes, "+
			"and streaming another slot from it would skip or repeat changes; run with --slot %s to continue it, "+
			"or choose another --name for a new applier on slot %q (remove the old one first with walapply drop --name %s if it is to go)",
			ErrWrongSlot, cfg.Name, slot, cfg.Slot, origin, slot, cfg.Slot, cfg.Name)}
	}
	return updateApplier(ctx, conn, cfg, sys, "")
}

// updateApplier records a start of a registered applier: its publications
// and the source's timeline, and whatever set (an SQL fragment with
// parameters from $4 on) adds.
func updateApplier(ctx context.Context, conn *pgx.Conn, cfg *Config, sys protocol.SystemInfo, set string, args ...any) error {
	_, err := conn.Exec(ctx, `UPDATE walapply.appliers SET publications = $2, source_timeline = $3, updated_at = now()`+set+` WHERE name = $1`,
		append([]any{oneShot, cfg.Name, cfg.Publications, sys.Timeline}, args...)...)
	if err != nil {
		return fmt.Errorf("updating applier %q in walapply.appliers on the target: %w", cfg.Name, err)
	}
	return nil
}

// ErrOriginTaken is returned when a new applier's replication origin
// already holds progress that no applier of this database recorded.
var ErrOriginTaken = errors.New("apply: the applier's replication origin belongs to another applier")

// checkOriginUnowned refuses a new applier (no row in this database's
// walapply.appliers) whose origin already has progress. Replication origins
// belong to the whole target cluster, walapply.appliers to one database: an
// applier of the same name in another database of the cluster (or one whose
// row was deleted by hand) owns that progress, and streaming this
// applier's slot from it would skip or repeat changes.
func checkOriginUnowned(ctx context.Context, conn *pgx.Conn, cfg *Config, origin string) error {
	progress, _, err := state.OriginProgress(ctx, conn, origin, false)
	if err != nil {
		return err
	}
	if progress == protocol.InvalidLSN {
		return nil
	}
	var db string
	if err := conn.QueryRow(ctx, `SELECT pg_catalog.current_database()`, oneShot).Scan(&db); err != nil {
		return fmt.Errorf("reading the target's database name: %w", err)
	}
	return &PermanentError{fmt.Errorf("%w: replication origin %q already has progress %s, but database %q has no applier %q: "+
		"origins are shared by every database of a PostgreSQL cluster, so it belongs to an applier of that name in another database of the target cluster "+
		"(or to one whose walapply.appliers row was deleted); choose another --name for this one",
		ErrOriginTaken, origin, progress, db, cfg.Name)}
}
