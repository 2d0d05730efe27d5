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

// TestTimelineChangeRefused: an applier whose origin progress belongs to
// one timeline of the source refuses the same cluster on another timeline
// unless told (AllowTimelineChange), then follows it, the slot's changes
// from either side of the switch included.
func TestTimelineChangeRefused(t *testing.T) {
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

		before := h.secOrigin("tl")
		err := secRun(t, cfg)
		if !errors.Is(err, apply.ErrWrongSource) || !strings.Contains(err.Error(), "timeline") || apply.IsTransient(err) {
			t.Fatalf("want a permanent ErrWrongSource about the timeline, got %v", err)
		}
		t.Logf("refused: %v", err)
		if after := h.secOrigin("tl"); after != before {
			t.Errorf("origin moved from %s to %s", before, after)
		}
		h.expect(tableRows("t", ""), "(1)")

		// Told, it follows the new timeline and records it.
		cfg.AllowTimelineChange = true
		stop = h.runApplier(cfg)
		h.waitCaughtUp("tl", time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		cfg.AllowTimelineChange = false
		stop = h.runApplier(cfg)
		h.source(`INSERT INTO t VALUES (4)`)
		h.waitCaughtUp("tl", time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if n := h.compare(tableRows("t", "")); n != 4 {
			t.Errorf("%d rows, want 4", n)
		}
	})
}
