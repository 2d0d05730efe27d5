package apply

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/rs/zerolog"
	"github.com/walapply/walapply/apply/internal/timeline"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/state"
)

// ErrDiverged is returned when the target holds source transactions that
// the source's current timeline does not have.
var ErrDiverged = errors.New("apply: the target holds transactions the source's timeline does not have")

// timelineSwitch is what the preflight found out about a change of the
// source's timeline since the applier's last start.
type timelineSwitch struct {
	from, to int32
	// at is the position up to which the two timelines share their WAL.
	at protocol.LSN
	// progress is the target's origin progress it was checked against.
	progress protocol.LSN
}

// divergedError says that the target's progress lies beyond the point where
// the source's timeline left the recorded one, and what the operator can do.
func divergedError(applier, origin string, sw timelineSwitch) error {
	return fmt.Errorf("%w: applier %q applied the source's changes up to %s on timeline %d (origin %q), "+
		"but the source's timeline %d leaves timeline %d at %s: the target holds transactions between %s and %s that the new primary never had "+
		"(a standby that lagged behind was promoted, or the source was restored to an earlier point), and no position on timeline %d comes after them. "+
		"Rebuild the target's published tables from the new primary (walapply drop --name %s, emptying the tables, then a start with --copy), "+
		"or start a new applier with --copy into a fresh target; --allow-timeline-change would continue from %s and keep the difference",
		ErrDiverged, applier, sw.progress, sw.from, origin, sw.to, sw.from, sw.at, sw.at, sw.progress, sw.to, applier, sw.progress)
}

// historyCheck is what checkSourceHistory needs of the session: the
// target's control connection, the source's replication connection (which
// reads the timeline histories), the applier's name and origin, and
// --allow-timeline-change. It is built by the preflight (preflight.go), so
// that this file needs nothing of the session.
type historyCheck struct {
	control *pgx.Conn
	source  timeline.Histories
	applier string
	origin  string
	allow   bool
	log     zerolog.Logger
}

// check is the preflight's check of the source's identity against the
// applier's recorded one (checkSourceHistory, preflight.go): the same cluster (system
// identifier), and a timeline whose history contains everything the target
// applied. A new applier (no row yet) records them when it registers.
// It returns the problems, and the timeline switch to follow (nil when
// the source is on the recorded timeline or the applier is new), which
// recordTimeline records once the preflight passed.
// With AllowTimelineChange a refused timeline is accepted, with a warning
// that says what is overridden.
//
// Following the source through a failover (DESIGN.md invariant 9: an
// applier is bound to its source's timeline history).
//
// An LSN names a place in one timeline's WAL. A promoted standby (or a
// point-in-time recovery) starts a new timeline that shares its parent's
// WAL up to the switch point its history file records, and writes WAL of
// its own from there. The target's origin progress is the end of the last
// source transaction it applied (or prepared), on the timeline recorded in
// walapply.appliers.source_timeline: if that end is at or before the point
// where the source's current history leaves the recorded timeline,
// everything applied is in the new primary's history too, and streaming
// from the origin's progress continues exactly where it stopped. If it is
// beyond, the target holds transactions the new primary never had (the
// standby lagged when it was promoted): no position on the new timeline
// means "after them", and walapply refuses.
//
// The origin's progress is what decides, not walapply.appliers.confirmed_lsn:
// confirmed_lsn may pass the switch point with nothing applied beyond it
// (idle confirmations of positions without changes for the applier), which
// costs nothing on the new timeline. Positions past the switch point mean
// nothing there, so following a timeline brings confirmed_lsn back to the
// switch point, and the slot position check (identity.go) keeps holding
// the slot to what the target really has.
func (c historyCheck) check(ctx context.Context, sys protocol.SystemInfo) ([]error, *timelineSwitch, error) {
	var systemID string
	var recorded int32
	err := c.control.QueryRow(ctx, `SELECT source_system_id, source_timeline FROM walapply.appliers WHERE name = $1`, c.applier).Scan(&systemID, &recorded)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil, nil
	case err != nil:
		return nil, nil, fmt.Errorf("reading applier %q from walapply.appliers on the target: %w", c.applier, err)
	}
	if systemID != sys.SystemID {
		return []error{fmt.Errorf("%w: applier %q replicates from the cluster with system identifier %s, but the source is %s; "+
			"use another --name (and slot) for a new source, or remove the applier from the target (walapply drop --name %s) if you really mean to switch",
			ErrWrongSource, c.applier, systemID, sys.SystemID, c.applier)}, nil, nil
	}
	if recorded == sys.Timeline {
		return nil, nil, nil
	}
	sw := timelineSwitch{from: recorded, to: sys.Timeline}
	if sw.progress, _, err = state.OriginProgress(ctx, c.control, c.origin, true); err != nil {
		return nil, nil, fmt.Errorf("reading the progress of replication origin %q on the target: %w", c.origin, err)
	}
	problem, err := c.compareTimelines(ctx, &sw)
	if err != nil {
		return nil, nil, err
	}
	log := c.log
	switch {
	case problem == nil:
		log.Info().Int32("from_timeline", sw.from).Int32("to_timeline", sw.to).Stringer("switch_lsn", sw.at).Stringer("origin_lsn", sw.progress).
			Msg("the source is on a new timeline that contains everything the target applied; following it")
	case c.allow:
		log.Warn().Err(problem).Int32("from_timeline", sw.from).Int32("to_timeline", sw.to).
			Msg("--allow-timeline-change: OVERRIDING the refusal of the source's new timeline; the target may keep transactions the source does not have")
	default:
		return []error{problem}, &sw, nil
	}
	return nil, &sw, nil
}

// compareTimelines fills sw.at from the source's timeline histories
// (timeline.SharedUntil) and returns the problem, if any: the target's
// progress beyond it, or a history that could not be read.
func (c historyCheck) compareTimelines(ctx context.Context, sw *timelineSwitch) (problem error, err error) {
	at, err := timeline.SharedUntil(ctx, c.source, sw.from, sw.to)
	if err != nil {
		return timelineUnreadable(c.applier, sw, err)
	}
	sw.at = at
	if sw.progress <= sw.at {
		return nil, nil
	}
	return divergedError(c.applier, c.origin, *sw), nil
}

// timelineUnreadable is the problem of a timeline history the source did
// not give: the file missing from the source's pg_wal (58P01, which
// IsTransient counts as the server's I/O trouble) or not parsing is a
// problem, a lost connection an error to retry.
func timelineUnreadable(applier string, sw *timelineSwitch, err error) (problem error, _ error) {
	var pgErr *pgconn.PgError
	if !(errors.As(err, &pgErr) && pgErr.Code == "58P01") && !errors.Is(err, protocol.ErrTimelineHistory) {
		return nil, err
	}
	return fmt.Errorf("%w: applier %q replicates from timeline %d, and the source is on timeline %d, but its timeline history could not be read (%v), "+
		"so walapply cannot tell whether the transactions the target applied (up to %s) are in the source's history; "+
		"if you know they are (compare the history files in the source's pg_wal), start once with --allow-timeline-change",
		ErrWrongSource, applier, sw.from, sw.to, err, sw.progress), nil
}

// recordTimeline records the timeline the preflight decided to follow and
// brings walapply.appliers.confirmed_lsn back to the switch point: what
// was confirmed beyond it was confirmed to another timeline. It runs after
// the preflight, before the applier's row is otherwise updated.
func recordTimeline(ctx context.Context, control *pgx.Conn, applier string, sw *timelineSwitch) error {
	if sw == nil {
		return nil
	}
	_, err := control.Exec(ctx, `UPDATE walapply.appliers SET source_timeline = $2,
			confirmed_lsn = CASE WHEN confirmed_lsn > $3::text::pg_lsn THEN $3::text::pg_lsn ELSE confirmed_lsn END, updated_at = now()
		WHERE name = $1 AND source_timeline = $4`, applier, sw.to, sw.at.String(), sw.from)
	if err != nil {
		return fmt.Errorf("recording timeline %d of the source for applier %q in walapply.appliers on the target: %w", sw.to, applier, err)
	}
	return nil
}
