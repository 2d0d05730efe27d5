package apply

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/migrations"
	"github.com/walapply/walapply/protocol"
)

// prepareTarget brings the target's walapply schema up to date.
func prepareTarget(ctx context.Context, conn *pgx.Conn, cfg *Config) error {
	if err := migrations.Up(ctx, cfg.Target); err != nil {
		return fmt.Errorf("migrating the walapply schema on the target: %w", err)
	}
	return nil
}

// ErrWrongSource is returned when the source is not the cluster whose
// changes the target's origin progress belongs to.
var ErrWrongSource = errors.New("apply: source does not match this applier's recorded source")

// registerApplier records this applier on the target, or checks that the
// source is the one recorded: pointing a replica at another cluster must
// not silently mix data (its LSNs would mean nothing against the origin's
// progress).
func registerApplier(ctx context.Context, conn *pgx.Conn, cfg *Config, origin string, sys protocol.SystemInfo) error {
	var systemID string
	var timeline int32
	err := conn.QueryRow(ctx, `SELECT source_system_id, source_timeline FROM walapply.appliers WHERE name = $1`, cfg.Name).Scan(&systemID, &timeline)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		_, err = conn.Exec(ctx, `INSERT INTO walapply.appliers (name, slot_name, publications, origin_name, source_system_id, source_timeline)
			VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (name) DO NOTHING`,
			cfg.Name, cfg.Slot, cfg.Publications, origin, sys.SystemID, sys.Timeline)
		if err != nil {
			return fmt.Errorf("recording applier %q in walapply.appliers on the target: %w", cfg.Name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("reading applier %q from walapply.appliers on the target: %w", cfg.Name, err)
	}
	if systemID != sys.SystemID {
		return &PermanentError{fmt.Errorf("%w: applier %q replicates from the cluster with system identifier %s, but the source is %s; "+
			"use another --name (and slot) for a new source, or remove the applier's row and origin from the target if you really mean to switch",
			ErrWrongSource, cfg.Name, systemID, sys.SystemID)}
	}
	if timeline != sys.Timeline && !cfg.AllowTimelineChange {
		return &PermanentError{fmt.Errorf("%w: applier %q replicates from timeline %d of cluster %s, but the source is on timeline %d; "+
			"if the source was promoted from a standby of the same cluster and its slot carried over, run once with --allow-timeline-change",
			ErrWrongSource, cfg.Name, timeline, systemID, sys.Timeline)}
	}
	_, err = conn.Exec(ctx, `UPDATE walapply.appliers SET slot_name = $2, publications = $3, source_timeline = $4, updated_at = now() WHERE name = $1`,
		cfg.Name, cfg.Slot, cfg.Publications, sys.Timeline)
	if err != nil {
		return fmt.Errorf("updating applier %q in walapply.appliers on the target: %w", cfg.Name, err)
	}
	return nil
}
