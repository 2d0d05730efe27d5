package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/testenv"
)

// TestStatusSlotMissing: an applier whose slot no longer exists on the
// source is shown as "slot missing on the source" (text) and slot_missing
// (--json), instead of failing status --source.
func TestStatusSlotMissing(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		ctx := context.Background()
		pair := statusPair(t, version)
		source, target := pair.Source.ConnString(""), pair.Target.ConnString("")
		cfg := statusApplier(t, source, target, "gone_slot")
		cfg.Name = "gone"
		r, err := apply.Start(ctx, cfg)
		statusMust(t, err)
		statusMust(t, r.WaitCaughtUp(ctx))
		statusMust(t, r.Stop())
		statusMust(t, pair.Source.WaitSlotActive(ctx, "gone_slot", false, 10*time.Second))
		statusMust(t, pair.Source.Exec(ctx, "SELECT pg_drop_replication_slot('gone_slot')"))

		out, _, err := runStatus(ctx, "--target", target, "--source", source)
		statusMust(t, err)
		if !strings.Contains(out, "slot missing on the source") {
			t.Errorf("status text does not say the slot is missing:\n%s", out)
		}
		rep := statusJSON(t, ctx, "--target", target, "--source", source)
		if len(rep.Appliers) != 1 || rep.Appliers[0].Source == nil || !rep.Appliers[0].Source.SlotMissing || rep.Appliers[0].Source.Slot != nil {
			t.Errorf("status --json: %+v, want the applier with slot_missing", rep.Appliers)
		}
	})
}
