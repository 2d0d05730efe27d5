package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/testenv"
)

// TestStatusFailoverSlot: --failover creates a failover-enabled slot on
// PostgreSQL 17+, or turns failover on for an existing one, which status
// shows (text and --json); before 17 the start is refused by the
// preflight, with nothing created.
func TestStatusFailoverSlot(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		ctx := context.Background()
		pair := statusPair(t, version)
		source, target := pair.Source.ConnString(""), pair.Target.ConnString("")
		cfg := statusApplier(t, source, target, "fo_slot")
		cfg.Name, cfg.Failover = "fo", true
		r, err := apply.Start(ctx, cfg)
		if version < 17 {
			var pe *apply.PreflightError
			if !errors.As(err, &pe) || !strings.Contains(err.Error(), "--failover needs PostgreSQL 17") {
				t.Fatalf("want the preflight's refusal of --failover before 17, got %v", err)
			}
			t.Logf("refused: %v", err)
			return
		}
		statusMust(t, err)
		statusMust(t, r.WaitCaughtUp(ctx))
		statusMust(t, r.Stop())

		out, _, err := runStatus(ctx, "--target", target, "--source", source)
		statusMust(t, err)
		if !strings.Contains(out, "failover") || !strings.Contains(out, "on: standbys with sync_replication_slots = on keep a copy") {
			t.Errorf("status text does not show the failover slot:\n%s", out)
		}
		t.Logf("status:\n%s", out)
		rep := statusJSON(t, ctx, "--target", target, "--source", source)
		if len(rep.Appliers) != 1 || rep.Appliers[0].Source == nil || rep.Appliers[0].Source.Slot == nil {
			t.Fatalf("status --json: %+v", rep.Appliers)
		}
		sl := rep.Appliers[0].Source.Slot
		if sl.Failover == nil || !*sl.Failover || sl.Synced == nil || *sl.Synced {
			t.Errorf("status --json: failover %v, synced %v; want true, false", sl.Failover, sl.Synced)
		}

		// An existing slot created without failover gets it.
		statusMust(t, pair.Source.Exec(ctx, "SELECT pg_create_logical_replication_slot('plain_slot', 'pgoutput')"))
		r, err = apply.Start(ctx, apply.Config{Source: source, Target: target, Slot: "plain_slot", Failover: true,
			Publications: []string{"p"}, Name: "plain", FeedbackInterval: 50 * time.Millisecond, ProgressInterval: -1,
			Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)})
		statusMust(t, err)
		statusMust(t, r.WaitCaughtUp(ctx))
		statusMust(t, r.Stop())
		for _, a := range statusJSON(t, ctx, "--target", target, "--source", source).Appliers {
			if sl := a.Source.Slot; a.Name == "plain" && (sl == nil || sl.Failover == nil || !*sl.Failover) {
				t.Errorf("slot plain_slot: %+v, want failover turned on", sl)
			}
		}
	})
}
