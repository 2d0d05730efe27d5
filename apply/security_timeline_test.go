package apply_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/internal/testutil"
	"github.com/walapply/walapply/testenv"
)

// newTimeline moves cluster c to a new timeline the cheap way, without a
// standby: a restart in archive recovery (recovery.signal) whose
// restore_command finds nothing, so that recovery ends at the end of the
// local WAL and the server promotes itself onto timeline n+1, as after a
// point-in-time recovery or a failover. The cluster keeps its system
// identifier and its logical slots.
func newTimeline(t *testing.T, h *harness, c *testenv.Cluster) {
	t.Helper()
	if err := c.Stop(h.ctx); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(c.DataDir())
	if err != nil {
		t.Fatal(err)
	}
	uid, gid := int(st.Sys().(*syscall.Stat_t).Uid), int(st.Sys().(*syscall.Stat_t).Gid)
	conf, err := os.OpenFile(filepath.Join(c.DataDir(), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conf.WriteString("restore_command = 'false'\n"); err != nil {
		t.Fatal(err)
	}
	conf.Close()
	signal := filepath.Join(c.DataDir(), "recovery.signal")
	if err := os.WriteFile(signal, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(signal, uid, gid); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(h.ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for h.rows(c, "SELECT pg_is_in_recovery()::text")[0] != "false" {
		if time.Now().After(deadline) {
			t.Fatal("the source did not leave archive recovery within a minute")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTimelineChangeFollowed: an applier whose origin progress belongs to
// one timeline of the source follows the same cluster onto a new timeline
// by itself when everything it applied is in the new timeline's history
// (the slot's changes from either side of the switch included), and
// records the new timeline. When the target is past the point where the
// source's timeline left the recorded one, the start is refused with both
// positions and the target is left as it was, unless told
// (AllowTimelineChange), which is logged as an override.
func TestTimelineChangeFollowed(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, nil)
		h.both(`CREATE TABLE t (id int PRIMARY KEY)`)
		h.source(`CREATE PUBLICATION pub FOR TABLE t`)
		h.createSlot("tl")
		cfg := h.secConfig("tl", "pub", nil)
		stop := h.runApplier(cfg)
		h.source(`INSERT INTO t VALUES (1)`)
		h.waitCaughtUp("tl", time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		// Written on timeline 1 but not yet replicated.
		h.source(`INSERT INTO t VALUES (2)`)

		newTimeline(t, h, h.pair.Source)
		if tl := h.rows(h.pair.Source, "SELECT timeline_id::text FROM pg_control_checkpoint()"); tl[0] == "1" {
			t.Fatalf("the source is still on timeline 1")
		}
		h.source(`INSERT INTO t VALUES (3)`)

		// Everything applied (row 1) is before the switch point: followed
		// without a flag, and the new timeline recorded.
		stop = h.runApplier(cfg)
		h.waitCaughtUp("tl", time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if n := h.compare(tableRows("t", "")); n != 3 {
			t.Errorf("%d rows, want 3", n)
		}
		if tl := h.rows(h.pair.Target, "SELECT source_timeline::text FROM walapply.appliers WHERE name = 'tl'"); tl[0] != "2" {
			t.Errorf("walapply.appliers.source_timeline is %s, want 2", tl[0])
		}

		// A target that holds more than the source's new timeline has (as
		// after a promotion of a lagging standby): the origin is moved
		// past the source's end of WAL before the next timeline begins.
		end := h.rows(h.pair.Source, "SELECT (pg_current_wal_lsn() + 16777216)::text")[0]
		h.target(`SELECT pg_replication_origin_advance('walapply_tl', '` + end + `')`)
		newTimeline(t, h, h.pair.Source)
		h.source(`INSERT INTO t VALUES (4)`)
		err := secRun(t, cfg)
		if !errors.Is(err, apply.ErrDiverged) || apply.IsTransient(err) || !strings.Contains(err.Error(), end) || !strings.Contains(err.Error(), "never had") {
			t.Fatalf("want a permanent ErrDiverged naming %s, got %v", end, err)
		}
		t.Logf("refused: %v", err)
		if after := h.secOrigin("tl"); after != end {
			t.Errorf("origin moved from %s to %s", end, after)
		}
		if tl := h.rows(h.pair.Target, "SELECT source_timeline::text FROM walapply.appliers WHERE name = 'tl'"); tl[0] != "2" {
			t.Errorf("the refused start recorded timeline %s", tl[0])
		}
		h.expect(tableRows("t", ""), "(1)", "(2)", "(3)")

		// Told, it starts, and says loudly what it overrides.
		log := &testutil.LogBuffer{}
		cfg = h.secConfig("tl", "pub", log)
		cfg.AllowTimelineChange = true
		stop = h.runApplier(cfg)
		deadline := time.Now().Add(time.Minute)
		for !strings.Contains(log.String(), `"message":"replicating"`) {
			if err := h.applierStopped(); err != nil || time.Now().After(deadline) {
				t.Fatalf("the overridden start did not replicate (%v); log:\n%s", err, log)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(log.String(), `"level":"warn"`) || !strings.Contains(log.String(), "OVERRIDING") || !strings.Contains(log.String(), end) {
			t.Errorf("no warning saying what --allow-timeline-change overrode; log:\n%s", log)
		}

		// A new timeline whose history file is gone from the source's
		// pg_wal cannot be checked: refused, saying so.
		newTimeline(t, h, h.pair.Source)
		if err := os.Remove(filepath.Join(h.pair.Source.DataDir(), "pg_wal", "00000004.history")); err != nil {
			t.Fatal(err)
		}
		cfg.AllowTimelineChange = false
		err = secRun(t, cfg)
		if !errors.Is(err, apply.ErrWrongSource) || apply.IsTransient(err) || !strings.Contains(err.Error(), "timeline history could not be read") {
			t.Fatalf("want a permanent ErrWrongSource about the unreadable history, got %v", err)
		}
		t.Logf("refused: %v", err)
	})
}
