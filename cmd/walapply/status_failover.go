package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// readSlotFailover adds the slot's failover and synced columns
// (PostgreSQL 17+) to sl; before 17 they stay unset.
func readSlotFailover(ctx context.Context, conn *pgx.Conn, slot string, sl *slotStatus) error {
	var version int
	if err := conn.QueryRow(ctx, `SELECT pg_catalog.current_setting('server_version_num')::int`).Scan(&version); err != nil {
		return fmt.Errorf("reading the source's version: %w", err)
	}
	if version < 170000 {
		return nil
	}
	var failover, synced bool
	err := conn.QueryRow(ctx, `SELECT failover, synced FROM pg_catalog.pg_replication_slots WHERE slot_name = $1`, slot).Scan(&failover, &synced)
	if err != nil {
		return fmt.Errorf("reading the failover state of replication slot %q on the source: %w", slot, err)
	}
	sl.Failover, sl.Synced = &failover, &synced
	return nil
}

// failoverText says what the slot's failover state means.
func failoverText(sl *slotStatus) string {
	switch {
	case !*sl.Failover:
		return "off: standbys do not synchronise this slot (walapply run --failover turns it on)"
	case *sl.Synced:
		return "on, synced: this server's copy of the slot was synchronised from a primary"
	default:
		return "on: standbys with sync_replication_slots = on keep a copy of this slot"
	}
}
