package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/testenv"
)

// TestStatusLagReplicationRole: with the least-privilege source role of
// docs/SECURITY.md (LOGIN REPLICATION, nothing else), for which
// PostgreSQL hides pg_stat_replication's lag columns, status --source
// still gives the slot's lag in time, measured from what the role can see,
// and says how; it no longer says "not measured yet" forever.
func TestStatusLagReplicationRole(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		ctx := context.Background()
		pair := statusPair(t, version)
		statusMust(t, pair.Source.Exec(ctx, "CREATE ROLE walapply_source LOGIN REPLICATION"))
		source := strings.Replace(pair.Source.ConnString(""), "//postgres@", "//walapply_source@", 1)
		target := pair.Target.ConnString("")
		r, err := apply.Start(ctx, statusApplier(t, source, target, "lag"))
		statusMust(t, err)
		defer r.Stop()
		statusMust(t, r.WaitCaughtUp(ctx))

		// The target holds the applier (a lock on t): the source's WAL
		// stays unconfirmed while status looks.
		lock, err := pair.Target.Connect(ctx, "postgres")
		statusMust(t, err)
		defer lock.Close(ctx)
		hold := func() {
			t.Helper()
			_, err := lock.Exec(ctx, "BEGIN; LOCK TABLE t")
			statusMust(t, err)
			statusMust(t, pair.Source.Exec(ctx, "INSERT INTO t SELECT generate_series(1, 1000)"))
			statusMust(t, pair.Source.Exec(ctx, "TRUNCATE t"))
		}
		release := func() { _, err := lock.Exec(ctx, "COMMIT"); statusMust(t, err) }

		// Held for longer than status measures: it says why it cannot
		// tell, and that the lag is more than it waited.
		old := lagMeasureFor
		lagMeasureFor = 300 * time.Millisecond
		hold()
		rep := statusJSON(t, ctx, "--target", target, "--source", source)
		lagMeasureFor = old
		sl := rep.Appliers[0].Source.Slot
		t.Logf("held: lag_seconds %v, note %q", sl.LagSeconds, sl.LagNote)
		if sl.LagSeconds != nil || !strings.Contains(sl.LagNote, "pg_stat_replication hides its lag columns from this role") ||
			!strings.Contains(sl.LagNote, "within 300ms, so the lag is more than that") {
			t.Errorf("status --json, applier held, as walapply_source: lag_seconds %v, note %q", sl.LagSeconds, sl.LagNote)
		}

		// Released while status measures: the time it took.
		go func() { time.Sleep(500 * time.Millisecond); release() }()
		text, _, err := runStatus(ctx, "--target", target, "--source", source)
		statusMust(t, err)
		t.Logf("status as walapply_source:\n%s", text)
		if strings.Contains(text, "not measured yet") || !strings.Contains(text, "(measured by status: the time until the slot confirmed") {
			t.Errorf("status text's lag as walapply_source: want it measured by status")
		}
		statusMust(t, r.WaitCaughtUp(ctx))
		hold()
		go func() { time.Sleep(500 * time.Millisecond); release() }()
		rep = statusJSON(t, ctx, "--target", target, "--source", source)
		sl = rep.Appliers[0].Source.Slot
		// A measured lag, within what status waits (how long the
		// release took on a loaded machine is not asserted).
		if sl.LagSeconds == nil || sl.LagFrom != lagFromMeasured || *sl.LagSeconds <= 0 || *sl.LagSeconds > lagMeasureFor.Seconds() {
			got := "none"
			if sl.LagSeconds != nil {
				got = fmt.Sprint(*sl.LagSeconds)
			}
			t.Errorf("status --json slot as walapply_source: lag_seconds %s, from %q, note %q", got, sl.LagFrom, sl.LagNote)
		}
	})
}
