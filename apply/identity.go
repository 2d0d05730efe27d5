package apply

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/state"
)

// ErrSlotAhead is returned when the slot was confirmed past every position
// this applier holds or confirmed: the changes in between are gone from the
// source and never reached the target.
var ErrSlotAhead = errors.New("apply: the slot was confirmed past what the target holds")

// checkSlotPosition compares the slot's confirmed position with the
// origin's progress and the recorded confirmed position, before streaming
// starts, and sets s.confirmed.
//
// The slot's position against the applier's (DESIGN.md invariant 9).
//
// A start streams from the origin's progress on the target, and the source
// starts from the slot's confirmed_flush_lsn when that is further on,
// without a word. The slot being further on is normal in one case: with
// nothing pending, walapply confirms the position it has received
// (state.FlushTracker, invariant 2), past the last transaction the target
// applied. In every other case (pg_replication_slot_advance, another
// client consuming the slot, a slot dropped and created again under the
// same name, a target restored from an older backup) the changes between
// the origin's progress and the slot's position are lost.
//
// To tell the two apart exactly, walapply.appliers.confirmed_lsn records the
// highest flush position walapply sent beyond the origin's durable progress,
// written and flushed on the target before the status update that carries
// it is sent (session.confirm). Everything walapply ever confirmed is
// therefore at or below max(origin progress, confirmed_lsn), and a start
// refuses a slot confirmed past that (checkSlotPosition). The cost is one
// small synchronous write per feedback round in which the idle position
// moves past the origin, none while transactions are being applied (the
// flush position is then the origin's progress itself).
//
// Advancing the origin itself on those rounds would make the column
// unnecessary, but pg_replication_origin_advance refuses an origin that a
// session holds, also in that very session ("replication origin with ID 1
// is already active", checked on PostgreSQL 15 and 18), and the apply
// connection holds it for as long as it runs; an empty transaction with
// pg_replication_origin_xact_setup does not move it either (no commit
// record). That would take a write on the apply connection, between the
// applier's transactions, for the same cost.
//
// The values of confirmed_lsn: NULL for a row written before migration
// 00004 (nothing is known; the first start takes the slot's position as
// the applier's, as the previous version would have streamed from there);
// 0/0 for a new row. An applier whose origin and confirmed_lsn are both 0/0
// has applied and confirmed nothing yet: the slot's position is where it
// begins, and is recorded as such.
func (s *session) checkSlotPosition(ctx context.Context, progress protocol.LSN) error {
	cfg := s.cfg
	st, found, err := s.source.Slot(ctx, cfg.Slot)
	if err != nil {
		return fmt.Errorf("looking up replication slot %q on the source: %w", cfg.Slot, err)
	}
	if !found {
		return fmt.Errorf("replication slot %q vanished from the source while the applier started", cfg.Slot)
	}
	var recorded *string
	if err := s.control.QueryRow(ctx, `SELECT confirmed_lsn::text FROM walapply.appliers WHERE name = $1`, oneShot, cfg.Name).Scan(&recorded); err != nil {
		return fmt.Errorf("reading the confirmed position of applier %q from walapply.appliers on the target: %w", cfg.Name, err)
	}
	confirmed := protocol.InvalidLSN
	if recorded != nil {
		if confirmed, err = protocol.ParseLSN(*recorded); err != nil {
			return fmt.Errorf("walapply.appliers.confirmed_lsn of applier %q: %w", cfg.Name, err)
		}
	}
	adopt := recorded == nil || (progress == protocol.InvalidLSN && confirmed == protocol.InvalidLSN)
	if !adopt {
		if err := slotAheadError(cfg.Name, cfg.Slot, s.origin, st.ConfirmedFlush, progress, confirmed); err != nil {
			return err
		}
		s.confirmed = max(progress, confirmed)
		return nil
	}
	s.confirmed = max(progress, st.ConfirmedFlush)
	if _, err := s.control.Exec(ctx, `UPDATE walapply.appliers SET confirmed_lsn = $2::text::pg_lsn WHERE name = $1`, oneShot, cfg.Name, s.confirmed.String()); err != nil {
		return fmt.Errorf("recording the confirmed position of applier %q in walapply.appliers on the target: %w", cfg.Name, err)
	}
	cfg.Logger.Debug().Str("slot", cfg.Slot).Stringer("confirmed_lsn", s.confirmed).Msg("recorded where the applier begins on its slot")
	return nil
}

// refuseNewSlot is asked before a missing slot is created: a slot created
// now begins at the source's current position, so for an applier that
// already holds or confirmed changes of its slot (it was dropped on the
// source) every change between its position and now would be skipped
// without a word. A new applier (nothing applied, nothing confirmed) may
// create its slot.
func (s *session) refuseNewSlot(ctx context.Context) error {
	cfg := s.cfg
	progress, _, err := state.OriginProgress(ctx, s.control, s.origin, false)
	if err != nil {
		return err
	}
	var recorded string
	err = s.control.QueryRow(ctx, `SELECT coalesce(confirmed_lsn, '0/0')::text FROM walapply.appliers WHERE name = $1`, oneShot, cfg.Name).Scan(&recorded)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("reading the confirmed position of applier %q from walapply.appliers on the target: %w", cfg.Name, err)
	}
	confirmed := protocol.InvalidLSN
	if recorded != "" {
		if confirmed, err = protocol.ParseLSN(recorded); err != nil {
			return fmt.Errorf("walapply.appliers.confirmed_lsn of applier %q: %w", cfg.Name, err)
		}
	}
	held := max(progress, confirmed)
	if held == protocol.InvalidLSN {
		return nil
	}
	return &PermanentError{Err: fmt.Errorf("%w: replication slot %q of applier %q no longer exists on the source, and the applier holds its changes up to %s (origin %q at %s): "+
		"a slot created now would begin at the source's current position and skip every change after %s; not creating it. "+
		"Bring the target's published tables back in step (for example: walapply drop --name %s, then a new start with --copy)",
		ErrSlotAhead, cfg.Slot, cfg.Name, held, s.origin, progress, held, cfg.Name)}
}

// slotAheadError is checkSlotPosition's decision: an error when the slot's
// confirmed position slotFlush is past both the origin's progress and the
// recorded confirmed position.
func slotAheadError(applier, slot, origin string, slotFlush, progress, confirmed protocol.LSN) error {
	held := max(progress, confirmed)
	if slotFlush <= held {
		return nil
	}
	return &PermanentError{Err: fmt.Errorf("%w: replication slot %q was confirmed up to %s, but applier %q holds the source's changes only up to %s "+
		"(origin %q at %s; walapply.appliers.confirmed_lsn, the furthest it confirmed, at %s): the changes from %s to %s are gone from the slot and never reached the target. "+
		"Something other than this applier moved the slot (pg_replication_slot_advance, another client streaming from it, the slot dropped and created again), "+
		"or the target was restored from an older backup; walapply does not skip them silently. "+
		"Bring the target's published tables back in step (for example: walapply drop --name %s, then a new start with --copy)",
		ErrSlotAhead, slot, slotFlush, applier, held, origin, progress, confirmed, held, slotFlush, applier)}
}

// confirm returns the positions for the next status update. When the flush
// position passes both the origin's durable progress and what is recorded,
// it records it first, durably (synchronous_commit = local, whatever the
// target's default), so that no start ever finds the slot confirmed past
// what the target knows of.
func (s *session) confirm(ctx context.Context) (write, flush, apply protocol.LSN, err error) {
	write, flush, apply = s.tracker.Feedback()
	if flush <= s.confirmed || flush <= s.tracker.DurableLSN() {
		return write, flush, apply, nil
	}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue("SET LOCAL synchronous_commit = local")
	update := b.Queue(`UPDATE walapply.appliers SET confirmed_lsn = GREATEST(confirmed_lsn, $2::text::pg_lsn) WHERE name = $1`, s.cfg.Name, flush.String())
	b.Queue("COMMIT")
	var rows int64
	update.Exec(func(tag pgconn.CommandTag) error { rows = tag.RowsAffected(); return nil })
	if err := s.control.SendBatch(ctx, b).Close(); err != nil {
		return 0, 0, 0, fmt.Errorf("recording confirmed position %s of applier %q in walapply.appliers on the target: %w", flush, s.cfg.Name, err)
	}
	if rows != 1 {
		return 0, 0, 0, &PermanentError{Err: fmt.Errorf("applier %q has no row in walapply.appliers on the target any more (dropped while it ran?): not confirming %s", s.cfg.Name, flush)}
	}
	s.confirmed = flush
	return write, flush, apply, nil
}

// targetIdentity names the target database for spill directories
// (state.OpenSpillDir) as <system identifier>-<database oid>-<server
// address>-<port>: the cluster and database, and where the server listens,
// because a cluster cloned from a base backup (a staging copy of a
// production target) keeps the system identifier and the oids. The address
// is the server's side of the connection ("local" over a Unix socket). A
// target reached another way (another address of the same server) gets
// another default directory, which costs nothing: spill files are scratch
// that a start removes anyway. All of it is readable without privileges.
func targetIdentity(ctx context.Context, conn *pgx.Conn) (string, error) {
	var id string
	err := conn.QueryRow(ctx, `SELECT concat_ws('-',
		(SELECT system_identifier::text FROM pg_catalog.pg_control_system()),
		(SELECT oid::text FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database()),
		coalesce(pg_catalog.host(pg_catalog.inet_server_addr()), 'local'),
		pg_catalog.current_setting('port'))`, oneShot).Scan(&id)
	if err != nil {
		return "", fmt.Errorf("identifying the target database (for the spill directory): %w", err)
	}
	return id, nil
}
