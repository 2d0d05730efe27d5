package apply_test

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/internal/testutil"
	"github.com/walapply/walapply/testenv"
	"github.com/walapply/walapply/twophase"
)

// twoPhaseSlot creates a slot with two-phase decoding on the source.
func (h *harness) twoPhaseSlot(slot string) {
	h.t.Helper()
	h.source(fmt.Sprintf("SELECT pg_create_logical_replication_slot('%s', 'pgoutput', false, true)", slot))
}

// twoPhaseConfig is h.config with two-phase decoding and the log kept.
func (h *harness) twoPhaseConfig(slot string, pubs ...string) (apply.Config, *testutil.LogBuffer) {
	cfg := h.config(slot, pubs...)
	cfg.TwoPhase = true
	logs := &testutil.LogBuffer{}
	cfg.Logger = zerolog.New(zerolog.MultiLevelWriter(zerolog.NewTestWriter(h.t), logs)).Level(zerolog.DebugLevel)
	return cfg, logs
}

// prepareOnSource runs the statements in a transaction on the source and
// prepares it as gid; it returns the source xid.
func (h *harness) prepareOnSource(gid string, sqls ...string) uint32 {
	h.t.Helper()
	h.source(append(append([]string{"BEGIN"}, sqls...), "PREPARE TRANSACTION "+twophase.QuoteGID(gid))...)
	xid, err := strconv.ParseUint(h.scalar(true, "SELECT transaction::text FROM pg_prepared_xacts WHERE gid = $1", gid), 10, 32)
	if err != nil {
		h.t.Fatal(err)
	}
	return uint32(xid)
}

// gidOf is the target GID of source transaction xid for applier name.
func gidOf(t *testing.T, name string, xid uint32) string {
	t.Helper()
	gid, err := twophase.TargetGID(twophase.GIDModeApplier, name, xid, "")
	if err != nil {
		t.Fatal(err)
	}
	return gid
}

// preparedOn returns the GIDs prepared on a cluster, sorted.
func (h *harness) preparedOn(c *testenv.Cluster) []string {
	h.t.Helper()
	return h.rows(c, "SELECT gid FROM pg_prepared_xacts")
}

// waitPrepared waits until the target's prepared transactions are exactly
// gids.
func (h *harness) waitPrepared(timeout time.Duration, gids ...string) {
	h.t.Helper()
	slices.Sort(gids)
	deadline := time.Now().Add(timeout)
	for {
		got := h.preparedOn(h.pair.Target)
		if slices.Equal(got, gids) {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("prepared on the target: %q, want %q", got, gids)
		}
		select {
		case err := <-h.applierDone:
			h.t.Fatalf("the applier stopped while waiting for prepared transactions %q: %v", gids, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// expectNonePrepared checks that nothing is left prepared on the target.
func (h *harness) expectNonePrepared() {
	h.t.Helper()
	if got := h.preparedOn(h.pair.Target); len(got) != 0 {
		h.t.Errorf("prepared transactions left on the target: %q", got)
	}
}
