package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/testenv"
)

// drop against a real pair: an applier that copied and prepared a
// transaction; refused while it runs; then everything of it goes and
// nothing of others; a second drop finds nothing; an unreachable source
// leaves the slot and says how to drop it; a slot in use elsewhere is
// refused; --keep-slot keeps it.
func TestDropCommand(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		ctx := context.Background()
		pair := testenv.NewPair(t, testenv.PairOptions{Version: version})
		for _, c := range []*testenv.Cluster{pair.Source, pair.Target} {
			statusMust(t, c.Exec(ctx, "CREATE TABLE t (id int PRIMARY KEY)"))
		}
		statusMust(t, pair.Source.Exec(ctx, "CREATE PUBLICATION p FOR TABLE t"))
		statusMust(t, pair.Source.Exec(ctx, "INSERT INTO t SELECT generate_series(1, 10)"))
		source, target := pair.Source.ConnString(""), pair.Target.ConnString("")
		spill := filepath.Join(t.TempDir(), "spill")
		cfg := apply.Config{Source: source, Target: target, Slot: "app_slot", Publications: []string{"p"}, Name: "app",
			Copy: true, TwoPhase: true, SpillDir: spill, FeedbackInterval: 50 * time.Millisecond, ProgressInterval: -1,
			Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)}
		r, err := apply.Start(ctx, cfg)
		statusMust(t, err)
		defer r.Stop()
		// Prepared on the source, so prepared on the target under the
		// applier's GID.
		statusMust(t, pair.Source.Exec(ctx, "BEGIN; INSERT INTO t VALUES (100); PREPARE TRANSACTION 'src_gid'"))
		t.Cleanup(func() { _ = pair.Source.Exec(context.Background(), "ROLLBACK PREPARED 'src_gid'") })
		gid := waitValue(t, ctx, pair.Target, "SELECT gid FROM pg_prepared_xacts WHERE gid LIKE 'walapply\\_app\\_%'")
		// Not its own: applier app_x's origins and prepared transaction,
		// someone's prepared transaction, app_x's conflicts. Its own: a
		// copy origin left by a killed copy, a conflict, a spill file.
		statusMust(t, pair.Target.Exec(ctx, `SELECT pg_replication_origin_create(n) FROM unnest(ARRAY['walapply_app_x', 'walapply_copy1_app_x', 'walapply_copy3_app']) n`))
		for _, g := range []string{"walapply_app_x_7", "someone_else"} {
			statusMust(t, pair.Target.Exec(ctx, fmt.Sprintf("BEGIN; INSERT INTO t VALUES (-%d); PREPARE TRANSACTION '%s'", len(g), g)))
			t.Cleanup(func() { _ = pair.Target.Exec(context.Background(), "ROLLBACK PREPARED '"+g+"'") })
		}
		statusMust(t, pair.Target.Exec(ctx, `INSERT INTO walapply.conflicts (applier, kind, resolution) VALUES ('app', 'insert_exists', 'skipped'), ('app_x', 'insert_exists', 'skipped')`))

		host, _ := os.Hostname()
		_, _, err = runDrop(ctx, "--target", target, "--name", "app", "--source", source, "--spill-dir", spill)
		if want := fmt.Sprintf(`applier "app" is already running against this target (pid %d on host %s, since `, os.Getpid(), host); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("drop while the applier runs: %v\nwant %q", err, want)
		}
		if got := waitValue(t, ctx, pair.Source, "SELECT slot_name FROM pg_replication_slots"); got != "app_slot" {
			t.Fatalf("slots after a refused drop: %s", got)
		}
		statusMust(t, r.Stop())
		// A spill file left by a kill -9, in the directory run claimed for
		// this target.
		owner, err := os.ReadFile(filepath.Join(spill, "walapply-spill-owner"))
		statusMust(t, err)
		_, spillTarget, _ := strings.Cut(strings.TrimSpace(string(owner)), "\ntarget ")
		writeSpillFile(t, spill, "app", spillTarget, 99, 10)

		out, _, err := runDrop(ctx, "--target", target, "--name", "app", "--source", source, "--spill-dir", spill)
		statusMust(t, err)
		for _, want := range []string{`applier "app" dropped:`, `replication slot "app_slot" dropped on the source`,
			"replication origins dropped on the target: walapply_app, walapply_copy3_app\n",
			"prepared transactions rolled back on the target (they could never be finished: their COMMIT PREPARED would have come through the slot): " + gid + "\n",
			"rows deleted from the walapply schema: walapply.appliers 1, walapply.conflicts 1, walapply.copies 1, walapply.copy_state 1\n",
			"spill files removed from " + spill + ": 1; directory removed", "\n    walapply_app_x_7  prepared ", "\n    someone_else  prepared "} {
			if !strings.Contains(out, want) {
				t.Errorf("drop printed\n%s\nwithout %q", out, want)
			}
		}
		for q, want := range map[string]string{
			"SELECT count(*)::text FROM pg_replication_slots":                           "0",
			"SELECT string_agg(roname, ',' ORDER BY roname) FROM pg_replication_origin": "walapply_app_x,walapply_copy1_app_x",
			"SELECT string_agg(gid, ',' ORDER BY gid) FROM pg_prepared_xacts":           "someone_else,walapply_app_x_7",
			`SELECT (SELECT count(*) FROM walapply.appliers) || ' ' || (SELECT count(*) FROM walapply.copies) || ' ' || (SELECT count(*) FROM walapply.copy_state) || ' ' ||
				(SELECT count(*) FROM walapply.running) || ' ' || (SELECT string_agg(applier, ',') FROM walapply.conflicts)`: "0 0 0 0 app_x",
		} {
			c := pair.Target
			if strings.Contains(q, "slots") {
				c = pair.Source
			}
			if got := waitValue(t, ctx, c, q); got != want {
				t.Errorf("after drop, %s = %q, want %q", q, got, want)
			}
		}
		if _, err := os.Stat(spill); !os.IsNotExist(err) {
			t.Errorf("spill directory after drop: %v", err)
		}

		// Idempotent.
		out, _, err = runDrop(ctx, "--target", target, "--name", "app", "--source", source, "--spill-dir", spill)
		if err != nil || !strings.Contains(out, `nothing to drop: applier "app" has no trace on this target`) {
			t.Errorf("second drop: %v\n%s", err, out)
		}

		// The source unreachable: the slot is left, and drop says how to
		// drop it. (A slot cannot be created while a transaction is
		// prepared on the source.)
		// Its spill directory is run's default: drop finds it there.
		statusMust(t, pair.Source.Exec(ctx, "ROLLBACK PREPARED 'src_gid'"))
		stateHome := t.TempDir()
		t.Setenv("XDG_STATE_HOME", stateHome)
		cb := cfg
		cb.SpillDir = ""
		runAndStop(t, ctx, cb, "b")
		out, _, err = runDrop(ctx, "--target", target, "--name", "b", "--source", "postgres://postgres@127.0.0.1:1/postgres?connect_timeout=5")
		statusMust(t, err)
		if _, dir, ok := strings.Cut(out, "spill files removed from "); !ok || !strings.HasPrefix(dir, stateHome+string(filepath.Separator)) || !strings.Contains(dir, ": 0; directory removed\n") {
			t.Errorf("drop printed\n%s\nwithout the removal of run's default spill directory under %s", out, stateHome)
		} else if _, err := os.Stat(dir[:strings.Index(dir, ": 0;")]); !os.IsNotExist(err) {
			t.Errorf("the default spill directory after drop: %v", err)
		}
		if want := `replication slot "b_slot" left on the source (the source could not be reached: `; !strings.Contains(out, want) ||
			!strings.Contains(out, "it keeps WAL there until it is dropped: SELECT pg_drop_replication_slot('b_slot'); on the source") {
			t.Errorf("drop with the source unreachable printed\n%s", out)
		}
		if got := waitValue(t, ctx, pair.Source, "SELECT string_agg(slot_name, ',') FROM pg_replication_slots"); got != "b_slot" {
			t.Errorf("slots after a drop with the source unreachable: %s", got)
		}

		// The slot in use by something else: nothing is dropped; then
		// --keep-slot.
		cfg.SpillDir = t.TempDir()
		runAndStop(t, ctx, cfg, "c")
		rc, err := protocol.ConnectReplication(ctx, source)
		statusMust(t, err)
		defer rc.Close(ctx)
		_, err = rc.StartReplication(ctx, "c_slot", 0, protocol.StreamOptions{Publications: []string{"p"}})
		statusMust(t, err)
		pid := waitValue(t, ctx, pair.Source, "SELECT active_pid FROM pg_replication_slots WHERE slot_name = 'c_slot' AND active")
		_, _, err = runDrop(ctx, "--target", target, "--name", "c", "--source", source)
		if want := `replication slot "c_slot" of applier "c" is in use on the source by process ` + pid + " (pg_replication_slots.active_pid)"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("drop of a slot in use: %v\nwant %q", err, want)
		}
		if got := waitValue(t, ctx, pair.Target, "SELECT string_agg(name, ',') FROM walapply.appliers"); got != "c" {
			t.Errorf("appliers after a refused drop: %s", got)
		}
		out, _, err = runDrop(ctx, "--target", target, "--name", "c", "--source", source, "--keep-slot")
		statusMust(t, err)
		if !strings.Contains(out, `replication slot "c_slot" left on the source (--keep-slot)`) {
			t.Errorf("drop --keep-slot printed\n%s", out)
		}
		if got := waitValue(t, ctx, pair.Source, "SELECT string_agg(slot_name, ',' ORDER BY slot_name) FROM pg_replication_slots"); got != "b_slot,c_slot" {
			t.Errorf("slots after drop --keep-slot: %s", got)
		}
	})
}

// runAndStop runs applier name (slot name_slot, no copy, cfg's spill
// directory) until it caught up, then stops it.
func runAndStop(t *testing.T, ctx context.Context, cfg apply.Config, name string) {
	t.Helper()
	cfg.Name, cfg.Slot, cfg.CreateSlot, cfg.Copy, cfg.TwoPhase = name, name+"_slot", true, false, false
	r, err := apply.Start(ctx, cfg)
	statusMust(t, err)
	statusMust(t, r.WaitCaughtUp(ctx))
	statusMust(t, r.Stop())
}

// waitValue returns the first non-NULL value query returns on c, waiting
// up to 30 seconds for one.
func waitValue(t *testing.T, ctx context.Context, c *testenv.Cluster, query string) string {
	t.Helper()
	conn, err := c.Connect(ctx, "postgres")
	statusMust(t, err)
	defer conn.Close(ctx)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var v *string
		err := conn.QueryRow(ctx, "SELECT ("+query+")::text").Scan(&v)
		statusMust(t, err)
		if v != nil {
			return *v
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s returned nothing within 30 seconds", query)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func runDrop(ctx context.Context, args ...string) (string, string, error) {
	var out, errOut bytes.Buffer
	err := dropMain(ctx, args, &out, &errOut)
	return out.String(), errOut.String(), err
}
