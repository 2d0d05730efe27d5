package apply_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/testenv"
)

// identitySchema creates table t (published by p) and u (not published) on
// both sides.
func (h *harness) identitySchema() {
	h.both(`CREATE TABLE t (id int PRIMARY KEY, v text)`, `CREATE TABLE u (id int)`)
	h.source(`CREATE PUBLICATION p FOR TABLE t`)
}

// insertRows inserts rows from..to into t on the source.
func (h *harness) insertRows(from, to int) {
	h.t.Helper()
	h.source(fmt.Sprintf(`INSERT INTO t SELECT g, 'r' || g FROM generate_series(%d, %d) g`, from, to))
}

// An applier's name is bound to its slot: a start with a known name and
// another slot is refused before anything is created, and the first
// applier, restarted, gets every row written meanwhile (issue 16, point 7).
func TestApplierBoundToSlot(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, nil)
		h.identitySchema()
		h.createSlot("s1")
		cfg := h.config("s1", "p")
		cfg.Name = "same"
		// A first start with a mistyped slot fails and binds nothing: the
		// applier never streamed from it.
		typo := cfg
		typo.Slot, typo.CreateSlot = "s1typo", false
		if err := runRefused(t, typo); err == nil || !strings.Contains(err.Error(), `"s1typo" does not exist`) {
			t.Fatalf("a start with a missing slot: %v", err)
		}
		stop := h.runApplier(cfg)
		h.insertRows(1, 1)
		h.waitCaughtUp("s1", 30*time.Second)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		h.insertRows(2, 51)

		moved := cfg
		moved.Slot = "s2"
		err := runRefused(t, moved)
		var pe *apply.PermanentError
		if !errors.As(err, &pe) || !errors.Is(err, apply.ErrWrongSlot) || !strings.Contains(err.Error(), `"s1"`) || !strings.Contains(err.Error(), `"s2"`) {
			t.Fatalf("a start of applier same with --slot s2: %v; want a permanent ErrWrongSlot naming s1 and s2", err)
		}
		t.Logf("refused: %v", err)
		if slots := h.rows(h.pair.Source, `SELECT slot_name::text FROM pg_replication_slots`); len(slots) != 1 || slots[0] != "s1" {
			t.Fatalf("slots on the source after the refused start: %v, want only s1", slots)
		}
		if got := h.scalar(false, `SELECT slot_name FROM walapply.appliers WHERE name = 'same'`); got != "s1" {
			t.Fatalf("walapply.appliers.slot_name of applier same is %q after the refused start, want s1", got)
		}

		h.runApplier(cfg)
		h.waitCaughtUp("s1", 30*time.Second)
		h.expect(`SELECT count(*)::text FROM t`, "51")
	})
}

// A slot confirmed past the applier's position behind its back (here by
// pg_replication_slot_advance while it is stopped, with rows written in
// between) is refused with both positions named: those rows are gone from
// the slot and never reached the target.
func TestSlotAdvancedPastApplier(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, nil)
		h.identitySchema()
		h.createSlot("s")
		cfg := h.config("s", "p")
		stop := h.runApplier(cfg)
		h.insertRows(1, 1)
		h.waitCaughtUp("s", 30*time.Second)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		h.insertRows(2, 11)
		h.waitSlotInactive("s")
		h.source(`SELECT pg_replication_slot_advance('s', pg_current_wal_lsn())`)
		slotLSN := h.scalar(true, `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = 's'`)
		held := h.scalar(false, `SELECT greatest(pg_replication_origin_progress('walapply_s', true), confirmed_lsn)::text FROM walapply.appliers WHERE name = 's'`)

		err := runRefused(t, cfg)
		var pe *apply.PermanentError
		if !errors.As(err, &pe) || !errors.Is(err, apply.ErrSlotAhead) || !strings.Contains(err.Error(), slotLSN) || !strings.Contains(err.Error(), held) {
			t.Fatalf("a start after the slot was advanced to %s: %v; want a permanent ErrSlotAhead naming %s and %s", slotLSN, err, slotLSN, held)
		}
		t.Logf("refused: %v", err)
		h.expect(`SELECT count(*)::text FROM t`, "1")

		// The slot dropped: --create-slot would make one that begins now.
		h.waitSlotInactive("s")
		h.source(`SELECT pg_drop_replication_slot('s')`)
		err = runRefused(t, cfg)
		if !errors.As(err, &pe) || !errors.Is(err, apply.ErrSlotAhead) || !strings.Contains(err.Error(), held) || !strings.Contains(err.Error(), "no longer exists") {
			t.Fatalf("a start with --create-slot after the slot was dropped: %v; want a permanent ErrSlotAhead naming %s", err, held)
		}
		t.Logf("refused: %v", err)
		if slots := h.rows(h.pair.Source, `SELECT slot_name::text FROM pg_replication_slots`); len(slots) != 0 {
			t.Fatalf("slots on the source after the refused start: %v, want none", slots)
		}
	})
}

// The ordinary idle case: with nothing to apply, the applier confirms the
// source's position past the origin's progress (keepalives, changes of an
// unpublished table); a restart then finds the slot ahead of the origin and
// must start, because walapply itself confirmed that position. A row
// written before migration 00004 (confirmed_lsn NULL) starts too.
func TestIdleConfirmationRestarts(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, nil)
		h.identitySchema()
		h.createSlot("s")
		cfg := h.config("s", "p")
		stop := h.runApplier(cfg)
		h.insertRows(1, 1)
		h.waitCaughtUp("s", 30*time.Second)
		h.source(`INSERT INTO u SELECT generate_series(1, 100)`)
		h.waitCaughtUp("s", 30*time.Second)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		ahead := h.scalar(true, `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = 's'`)
		origin := h.scalar(false, `SELECT pg_replication_origin_progress('walapply_s', true)::text`)
		if h.scalar(true, `SELECT ($1::pg_lsn > $2::pg_lsn)::text`, ahead, origin) != "true" {
			t.Fatalf("the slot confirmed %s, not past the origin's %s: the test does not test the idle case", ahead, origin)
		}
		restart := func(from, to int) {
			t.Helper()
			stop := h.runApplier(cfg)
			h.insertRows(from, to)
			h.waitCaughtUp("s", 30*time.Second)
			if err := stop(); err != nil {
				t.Fatalf("restart after an idle confirmation: %v", err)
			}
		}
		restart(2, 2)
		if got := h.scalar(false, `SELECT (confirmed_lsn >= $1::pg_lsn)::text FROM walapply.appliers WHERE name = 's'`, ahead); got != "true" {
			t.Fatalf("walapply.appliers.confirmed_lsn does not cover the slot's %s", ahead)
		}
		h.source(`INSERT INTO u SELECT generate_series(1, 100)`)
		h.waitConfirmedIdle(cfg)
		h.target(`UPDATE walapply.appliers SET confirmed_lsn = NULL WHERE name = 's'`)
		restart(3, 3)
		h.expect(`SELECT count(*)::text FROM t`, "3")
	})
}

// waitSlotInactive waits until no walsender holds the slot: a stopped
// applier's walsender exits a moment after the applier.
func (h *harness) waitSlotInactive(slot string) {
	h.t.Helper()
	if err := h.pair.Source.WaitSlotActive(context.Background(), slot, false, 10*time.Second); err != nil {
		h.t.Fatal(err)
	}
}

// runRefused runs the applier and returns its error, failing the test if it
// does not stop by itself soon (a start that should be refused).
func runRefused(t *testing.T, cfg apply.Config) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := apply.Run(ctx, cfg)
	if ctx.Err() != nil {
		t.Fatal("the start was not refused: the applier ran on")
	}
	return err
}

// waitConfirmedIdle runs the applier until the slot confirms the source's
// position, and stops it.
func (h *harness) waitConfirmedIdle(cfg apply.Config) {
	h.t.Helper()
	stop := h.runApplier(cfg)
	h.waitCaughtUp(cfg.Slot, 30*time.Second)
	if err := stop(); err != nil {
		h.t.Fatal(err)
	}
}

// Two appliers of one name feeding different targets (two target clusters) from one host, with streaming on and the default
// spill directory: each keeps its own spill files, and neither start
// deletes the other's.
func TestSpillDirPerTarget(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, map[string]string{"logical_decoding_work_mem": "64kB"}, nil)
		h.identitySchema()
		// A second target cluster: replication origins are per cluster,
		// so two appliers of one name cannot share one.
		other := testenv.NewCluster(t, testenv.Options{Version: version})
		t2, err := other.Connect(h.ctx, "postgres")
		if err != nil {
			t.Fatal(err)
		}
		defer t2.Close(h.ctx)
		if _, err := t2.Exec(h.ctx, "CREATE TABLE t (id int PRIMARY KEY, v text)"); err != nil {
			t.Fatal(err)
		}
		h.createSlot("sa")
		h.createSlot("sb")
		state := t.TempDir()
		t.Setenv("XDG_STATE_HOME", state)
		cfgA := h.config("sa", "p")
		cfgA.Name, cfgA.SpillDir, cfgA.Streaming = "same", "", "on"
		cfgB := cfgA
		cfgB.Slot, cfgB.Target = "sb", other.ConnString("postgres")

		h.runApplier(cfgA)
		src := h.conn(true)
		h.run(src, "BEGIN", `INSERT INTO t SELECT g, repeat('x', 200) FROM generate_series(1, 5000) g`)
		h.waitSpillFiles(state, 1)
		h.runApplier(cfgB)
		files := h.waitSpillFiles(state, 2)
		if filepath.Dir(files[0]) == filepath.Dir(files[1]) {
			t.Fatalf("the two appliers spill into one directory: %v", files)
		}
		h.run(src, "COMMIT")
		h.waitCaughtUp("sa", 30*time.Second)
		h.waitCaughtUp("sb", 30*time.Second)
		h.expect(`SELECT count(*)::text FROM t`, "5000")
		var n int
		if err := t2.QueryRow(h.ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil || n != 5000 {
			t.Fatalf("the second target has %d rows (%v), want 5000", n, err)
		}
	})
}

// waitSpillFiles waits until n spill files exist at once under root, and
// returns them.
func (h *harness) waitSpillFiles(root string, n int) []string {
	h.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var files []string
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(path, ".spill") {
				files = append(files, path)
			}
			return nil
		})
		if len(files) >= n {
			return files
		}
		if err := h.applierStopped(); err != nil {
			h.t.Fatalf("waiting for %d spill files under %s: the applier stopped: %v", n, root, err)
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%d spill files under %s after 15s, want %d: %v", len(files), root, n, files)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Replication origins are shared by the databases of a cluster: a new
// applier in one database whose origin already holds the progress of the
// same name's applier in another is refused, not handed that progress.
func TestOriginOfAnotherDatabase(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, nil)
		h.identitySchema()
		if err := h.pair.Target.CreateDatabase(h.ctx, "db2"); err != nil {
			t.Fatal(err)
		}
		h.createSlot("s1")
		h.createSlot("s2")
		cfg := h.config("s1", "p")
		cfg.Name = "same"
		stop := h.runApplier(cfg)
		h.insertRows(1, 1)
		h.waitCaughtUp("s1", 30*time.Second)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		other := cfg
		other.Slot, other.Target, other.SpillDir = "s2", h.pair.Target.ConnString("db2"), t.TempDir()
		err := runRefused(t, other)
		if !errors.Is(err, apply.ErrOriginTaken) || !strings.Contains(err.Error(), `"walapply_same"`) || !strings.Contains(err.Error(), `"db2"`) {
			t.Fatalf("applier same in a second database of the target: %v; want ErrOriginTaken naming walapply_same and db2", err)
		}
		t.Logf("refused: %v", err)
	})
}
