package testenv

import (
	"context"
	"fmt"
	"time"
)

// WaitSlotActive waits until the replication slot is (active true) or is no
// longer (false) in use by a walsender, for at most timeout. A stopped
// subscriber's walsender exits a moment after the subscriber does, so a
// test that drops or advances a slot after stopping one waits for it here.
// A slot that does not exist counts as inactive.
func (c *Cluster) WaitSlotActive(ctx context.Context, slot string, active bool, timeout time.Duration) error {
	conn, err := c.Connect(ctx, "postgres")
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(timeout)
	for {
		var is bool
		err := conn.QueryRow(ctx, `SELECT coalesce((SELECT active FROM pg_catalog.pg_replication_slots WHERE slot_name = $1), false)`, slot).Scan(&is)
		if err != nil {
			return fmt.Errorf("testenv: reading slot %q: %w", slot, err)
		}
		if is == active {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("testenv: slot %q: active is not %t after %s", slot, active, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
