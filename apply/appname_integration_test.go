package apply_test

import (
	"testing"
	"time"

	"github.com/walapply/walapply/testenv"
)

// TestReplicationApplicationName: the applier's walsender is named after
// the applier in the source's pg_stat_replication, as its target
// connections are in the target's pg_stat_activity.
func TestReplicationApplicationName(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, nil)
		h.both(`CREATE TABLE t (id int PRIMARY KEY)`)
		h.source(`CREATE PUBLICATION p FOR TABLE t`)
		cfg := h.config("appslot", "p")
		cfg.Name = "billing"
		h.runApplier(cfg)
		h.source(`INSERT INTO t VALUES (1)`)
		h.waitCaughtUp("appslot", 30*time.Second)
		if got := h.rows(h.pair.Source, `SELECT application_name FROM pg_stat_replication`); len(got) != 1 || got[0] != "walapply billing stream" {
			t.Errorf("source pg_stat_replication.application_name: %q, want [\"walapply billing stream\"]", got)
		}
	})
}
