package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/state"
	"github.com/walapply/walapply/testenv"
)

// status against a real pair: a running applier, then a stopped one with
// the source written to since, prepared transactions on the target (its
// own and others') and spill files.
func TestStatusCommand(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		ctx := context.Background()
		pair := testenv.NewPair(t, testenv.PairOptions{Version: version})
		for _, c := range []*testenv.Cluster{pair.Source, pair.Target} {
			statusMust(t, c.Exec(ctx, "CREATE TABLE t (id int PRIMARY KEY)"))
		}
		statusMust(t, pair.Source.Exec(ctx, "CREATE PUBLICATION p FOR TABLE t"))
		source, target := pair.Source.ConnString(""), pair.Target.ConnString("")

		// Before any applier ran, the target has no walapply schema.
		if _, _, err := runStatus(ctx, "--target", target); err == nil || !strings.Contains(err.Error(), "no walapply applier has run against this target") {
			t.Errorf("status on a fresh target: %v", err)
		}

		r, err := apply.Start(ctx, apply.Config{Source: source, Target: target, Slot: "app_slot", CreateSlot: true,
			Publications: []string{"p"}, Name: "app", FeedbackInterval: 50 * time.Millisecond, ProgressInterval: -1,
			Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)})
		statusMust(t, err)
		defer r.Stop()
		statusMust(t, pair.Source.Exec(ctx, "INSERT INTO t SELECT generate_series(1, 100)"))
		statusMust(t, r.WaitCaughtUp(ctx))

		// Prepared on the target: one of this applier's, one of applier
		// "app_x" (same prefix), one of nobody's.
		gids := []string{"walapply_app_4242", "walapply_app_x_7", "someone_else"}
		for i, gid := range gids {
			statusMust(t, pair.Target.Exec(ctx, fmt.Sprintf("BEGIN; INSERT INTO t VALUES (%d); PREPARE TRANSACTION '%s'", -1-i, gid)))
		}
		t.Cleanup(func() {
			for _, gid := range gids {
				_ = pair.Target.Exec(context.Background(), "ROLLBACK PREPARED '"+gid+"'")
			}
		})
		spillDir := filepath.Join(t.TempDir(), "spill")
		writeSpillFile(t, spillDir, "app", "test-target", 99, 500)

		running := statusJSON(t, ctx, "--target", target, "--source", source, "--name", "app", "--spill-dir", spillDir)
		if len(running.Appliers) != 1 {
			t.Fatalf("%d appliers, want 1", len(running.Appliers))
		}
		a := running.Appliers[0]
		if a.Name != "app" || a.Slot != "app_slot" || strings.Join(a.Publications, ",") != "p" || a.Origin.Name != "walapply_app" {
			t.Errorf("applier %+v", a)
		}
		if want := originProgress(t, ctx, pair.Target, "walapply_app"); !a.Origin.Exists || a.Origin.Progress != want {
			t.Errorf("origin %+v, want progress %s", a.Origin, want)
		}
		roles := []string{}
		for _, s := range a.Sessions {
			roles = append(roles, s.Role)
		}
		if strings.Join(roles, ",") != "apply,control" {
			t.Errorf("target sessions %+v, want apply and control", a.Sessions)
		}
		if len(a.Prepared) != 1 || a.Prepared[0].GID != "walapply_app_4242" || a.Prepared[0].SourceXid != 4242 {
			t.Errorf("prepared %+v, want walapply_app_4242 only", a.Prepared)
		}
		s := a.Source
		if s == nil || s.Slot == nil {
			t.Fatalf("source %+v: want the slot", s)
		}
		if s.SystemIDMatches == nil || !*s.SystemIDMatches || s.SystemID != a.SourceSystemID {
			t.Errorf("source system id %q (matches %v), recorded %q", s.SystemID, s.SystemIDMatches, a.SourceSystemID)
		}
		sl := s.Slot
		if !sl.Active || sl.ActivePID == nil || sl.Plugin != "pgoutput" || sl.Database != "postgres" {
			t.Errorf("slot %+v: want an active pgoutput slot", sl)
		}
		checkLag(t, s)
		if sp := running.Spill; sp == nil || !sp.Exists || len(sp.Files) != 1 || sp.Files[0].Xid != 99 || sp.Files[0].Name != "xid-99.spill" {
			t.Errorf("spill %+v: want xid-99.spill", sp)
		} else if info, err := os.Stat(filepath.Join(spillDir, "xid-99.spill")); err != nil || sp.Bytes != info.Size() || sp.Files[0].Bytes != info.Size() {
			t.Errorf("spill bytes %d, file %v (%v)", sp.Bytes, info, err)
		}

		// The text form says the same.
		out, _, err := runStatus(ctx, "--target", target, "--source", source, "--spill-dir", spillDir)
		statusMust(t, err)
		for _, want := range []string{"applier app\n", "walapply_app: applied up to source " + a.Origin.Progress, "running            yes: apply pid",
			"slot on source     active (walsender pid", "1 pending on the target:", "walapply_app_4242  source xid 4242", ": 1 file, "} {
			if !strings.Contains(out, want) {
				t.Errorf("text output lacks %q:\n%s", want, out)
			}
		}

		// Stopped, with the source written to since: the slot lags.
		statusMust(t, r.Stop())
		statusMust(t, pair.Source.Exec(ctx, "INSERT INTO t SELECT generate_series(101, 200)"))
		stopped := statusJSON(t, ctx, "--target", target, "--source", source)
		a = stopped.Appliers[0]
		if len(a.Sessions) != 0 || a.Source.Slot.Active || a.Source.Slot.ActivePID != nil {
			t.Errorf("stopped applier: sessions %+v, slot %+v", a.Sessions, a.Source.Slot)
		}
		checkLag(t, a.Source)
		if *a.Source.Slot.LagBytes == 0 || a.Source.Slot.LagSeconds != nil {
			t.Errorf("stopped applier behind the source: lag %d bytes, %v s; want bytes, and no time (nothing measures it)", *a.Source.Slot.LagBytes, a.Source.Slot.LagSeconds)
		}
		out, _, err = runStatus(ctx, "--target", target, "--source", source)
		statusMust(t, err)
		for _, want := range []string{"running            no", "inactive (no applier connected)", "unknown while no applier is connected"} {
			if !strings.Contains(out, want) {
				t.Errorf("text output of a stopped applier lacks %q:\n%s", want, out)
			}
		}

		// Errors name what is wrong.
		if _, _, err := runStatus(ctx, "--target", target, "--name", "nope"); err == nil || !strings.Contains(err.Error(), `no applier "nope" on the target; it has "app"`) {
			t.Errorf("unknown applier: %v", err)
		}
		if _, _, err := runStatus(ctx); err == nil || !strings.Contains(err.Error(), "--target is required") {
			t.Errorf("no target: %v", err)
		}
	})
}

// checkLag checks that the slot's lag is consistent with its positions.
func checkLag(t *testing.T, s *sourceStatus) {
	t.Helper()
	cur, err1 := protocol.ParseLSN(s.CurrentLSN)
	conf, err2 := protocol.ParseLSN(s.Slot.ConfirmedFlushLSN)
	if err1 != nil || err2 != nil || s.Slot.LagBytes == nil {
		t.Fatalf("positions %q, %q, lag %v: %v %v", s.CurrentLSN, s.Slot.ConfirmedFlushLSN, s.Slot.LagBytes, err1, err2)
	}
	if want := int64(cur) - int64(conf); *s.Slot.LagBytes != max(want, 0) {
		t.Errorf("lag %d bytes, positions say %d", *s.Slot.LagBytes, want)
	}
	if s.Slot.RetainedBytes == nil || *s.Slot.RetainedBytes < *s.Slot.LagBytes {
		t.Errorf("retained %v bytes, lag %d", s.Slot.RetainedBytes, *s.Slot.LagBytes)
	}
}

// writeSpillFile leaves a spill file as a running applier for target (as
// its spill directory's owner file names it) would have it.
func writeSpillFile(t *testing.T, dir, applier, target string, xid uint32, records int) {
	t.Helper()
	d, _, err := state.OpenSpillDir(state.OSFS, dir, applier, target)
	statusMust(t, err)
	f, err := d.Create(xid)
	statusMust(t, err)
	for i := 0; i < records; i++ {
		statusMust(t, f.Append(xid, []byte("I some pgoutput message")))
	}
	statusMust(t, f.Close())
}

func originProgress(t *testing.T, ctx context.Context, c *testenv.Cluster, origin string) string {
	t.Helper()
	conn, err := c.Connect(ctx, "postgres")
	statusMust(t, err)
	defer conn.Close(ctx)
	var lsn string
	statusMust(t, conn.QueryRow(ctx, "SELECT pg_replication_origin_progress($1, false)::text", origin).Scan(&lsn))
	return lsn
}

func runStatus(ctx context.Context, args ...string) (string, string, error) {
	var out, errOut bytes.Buffer
	err := statusMain(ctx, args, &out, &errOut)
	return out.String(), errOut.String(), err
}

func statusJSON(t *testing.T, ctx context.Context, args ...string) statusReport {
	t.Helper()
	out, _, err := runStatus(ctx, append(args, "--json")...)
	statusMust(t, err)
	// One position, one name: the log and the metrics say confirmed_lsn.
	if strings.Contains(out, "confirmed_flush") {
		t.Errorf("status --json names the confirmed position otherwise than confirmed_lsn:\n%s", out)
	}
	var rep statusReport
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("status --json printed %s: %v", out, err)
	}
	return rep
}

// statusPair is where the status tests start: a pair with table t on both
// sides and publication p of it on the source.
func statusPair(t *testing.T, version int) *testenv.Pair {
	t.Helper()
	ctx := context.Background()
	pair := testenv.NewPair(t, testenv.PairOptions{Version: version})
	for _, c := range []*testenv.Cluster{pair.Source, pair.Target} {
		statusMust(t, c.Exec(ctx, "CREATE TABLE t (id int PRIMARY KEY)"))
	}
	statusMust(t, pair.Source.Exec(ctx, "CREATE PUBLICATION p FOR TABLE t"))
	return pair
}

// statusApplier is the applier the status tests run on p: it creates its
// slot, confirms often and logs warnings to the test.
func statusApplier(t *testing.T, source, target, slot string) apply.Config {
	return apply.Config{Source: source, Target: target, Slot: slot, CreateSlot: true,
		Publications: []string{"p"}, FeedbackInterval: 50 * time.Millisecond, ProgressInterval: -1,
		Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)}
}

func statusMust(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
