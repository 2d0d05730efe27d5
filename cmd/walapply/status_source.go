package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// readSourceState reads the applier's slot on the source.
func readSourceState(ctx context.Context, conn *pgx.Conn, a *applierStatus) (*sourceStatus, error) {
	s := &sourceStatus{}
	// pg_control_system() may be denied to a role without pg_monitor; the
	// rest does not depend on it.
	var sysID string
	if err := conn.QueryRow(ctx, "SELECT system_identifier::text FROM pg_catalog.pg_control_system()").Scan(&sysID); err == nil {
		s.SystemID = sysID
		match := sysID == a.SourceSystemID
		s.SystemIDMatches = &match
	}
	var slotType *string
	var active *bool // NULL when the slot does not exist
	slot := &slotStatus{}
	var lag, retained *int64
	var lagSecs *float64
	var hidden *bool // pg_stat_replication's row is there, its columns hidden from this role
	var restart, confirmed, walStatus, plugin, database *string
	err := conn.QueryRow(ctx, `SELECT pg_catalog.pg_current_wal_lsn()::text, s.slot_type, s.plugin, s.database, s.active, s.active_pid,
			s.restart_lsn::text, s.confirmed_flush_lsn::text, s.wal_status,
			pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), s.confirmed_flush_lsn)::bigint,
			pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), s.restart_lsn)::bigint,
			EXTRACT(epoch FROM r.flush_lag)::float8, r.reply_time, r.pid IS NOT NULL AND r.state IS NULL
		FROM (SELECT 1) one
		LEFT JOIN pg_catalog.pg_replication_slots s ON s.slot_name = $1
		LEFT JOIN pg_catalog.pg_stat_replication r ON r.pid = s.active_pid`, a.Slot).
		Scan(&s.CurrentLSN, &slotType, &plugin, &database, &active, &slot.ActivePID, &restart, &confirmed, &walStatus,
			&lag, &retained, &lagSecs, &slot.ReplyTime, &hidden)
	if err != nil {
		return nil, fmt.Errorf("reading replication slot %q on the source: %w", a.Slot, err)
	}
	if slotType == nil {
		s.SlotMissing = true
		return s, nil
	}
	slot.Active = *active
	slot.Plugin, slot.Database = deref(plugin), deref(database)
	slot.RestartLSN, slot.ConfirmedFlushLSN, slot.WALStatus = deref(restart), deref(confirmed), deref(walStatus)
	slot.LagBytes, slot.RetainedBytes = lag, retained
	if lag != nil && *lag < 0 {
		// Not expected (a client confirms only what it received), but a
		// negative lag would only confuse.
		zero := int64(0)
		slot.LagBytes = &zero
	}
	switch {
	case slot.LagBytes != nil && *slot.LagBytes == 0:
		zero := 0.0
		slot.LagSeconds = &zero
	case lagSecs != nil:
		slot.LagSeconds, slot.LagFrom = lagSecs, lagFromView
	}
	if err := readSlotFailover(ctx, conn, a.Slot, slot); err != nil { // status_failover.go
		return nil, err
	}
	s.Slot = slot
	if slot.LagSeconds == nil && slot.Active {
		return s, measureLag(ctx, conn, a.Slot, s, hidden != nil && *hidden) // status_lag.go
	}
	return s, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
