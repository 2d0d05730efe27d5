package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	lagFromView     = "pg_stat_replication.flush_lag"
	lagFromMeasured = "measured by status: the time until the slot confirmed the source's position at the start of status"
)

// lagMeasureFor is how long status waits for the slot to confirm.
var lagMeasureFor = 3 * time.Second

// measureLag fills in s.Slot's LagSeconds (or LagNote) when the view
// gave none: hidden says that it hides its columns from this role.
//
// The slot's lag in time. pg_stat_replication's flush_lag is what the
// walsender measured: how long the applier took to confirm recent WAL as
// durable. PostgreSQL shows that view's columns only to roles with the
// privileges of pg_read_all_stats; a REPLICATION-only role (the source
// role of docs/SECURITY.md) sees the walsender's pid and nulls. What every
// role sees is the slot's confirmed_flush_lsn and pg_current_wal_lsn(), so
// status measures the same thing itself: it reads the source's current
// position, and waits (at most lagMeasureFor) until the slot confirms it.
func measureLag(ctx context.Context, conn *pgx.Conn, slot string, s *sourceStatus, hidden bool) error {
	sl := s.Slot
	why := "the walsender has not measured it yet"
	if hidden {
		why = "pg_stat_replication hides its lag columns from this role (they need the privileges of pg_read_all_stats)"
	}
	start := time.Now()
	deadline := start.Add(lagMeasureFor)
	for {
		var confirmed bool
		var active *bool
		err := conn.QueryRow(ctx, `SELECT s.confirmed_flush_lsn >= $2::pg_lsn, s.active FROM pg_catalog.pg_replication_slots s WHERE s.slot_name = $1`,
			slot, s.CurrentLSN).Scan(&confirmed, &active)
		if err == pgx.ErrNoRows {
			sl.LagNote = why + "; and the slot is gone"
			return nil
		}
		if err != nil {
			return fmt.Errorf("measuring the lag of replication slot %q on the source: %w", slot, err)
		}
		if confirmed {
			secs := round1(time.Since(start).Seconds())
			sl.LagSeconds, sl.LagFrom = &secs, lagFromMeasured
			return nil
		}
		if active == nil || !*active {
			sl.LagNote = why + "; the applier disconnected while status measured"
			return nil
		}
		if time.Now().After(deadline) {
			sl.LagNote = fmt.Sprintf("%s; measured: the slot did not confirm the source's position %s within %s, so the lag is more than that",
				why, s.CurrentLSN, lagMeasureFor)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// lagTimeText is the lag in time, for the text output.
func lagTimeText(sl *slotStatus) string {
	switch {
	case sl.LagSeconds != nil && sl.LagFrom == lagFromMeasured:
		return (time.Duration(*sl.LagSeconds * float64(time.Second))).Round(time.Millisecond).String() + " (" + lagFromMeasured + ")"
	case sl.LagSeconds != nil:
		return (time.Duration(*sl.LagSeconds * float64(time.Second))).Round(time.Millisecond).String()
	case sl.LagNote != "":
		return "unknown: " + sl.LagNote
	case sl.Active:
		return "not measured yet"
	}
	return "unknown while no applier is connected"
}
