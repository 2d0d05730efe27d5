package apply_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/walapply/walapply/state"
	"github.com/walapply/walapply/testenv"
)

// A start that finds every replication state slot of the target taken
// says which setting to raise, and stops.
func TestNoOriginSlot(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		setting := "max_replication_slots"
		if version >= 18 {
			setting = "max_active_replication_origins"
		}
		h := newHarness(t, version, nil, map[string]string{setting: "2"})
		h.both("CREATE TABLE t (id int PRIMARY KEY)")
		h.source("CREATE PUBLICATION p FOR TABLE t")
		// Two origins with progress: abandoned appliers.
		h.target("SELECT pg_replication_origin_create('walapply_old1')", "SELECT pg_replication_origin_advance('walapply_old1', '0/10')",
			"SELECT pg_replication_origin_create('walapply_old2')", "SELECT pg_replication_origin_advance('walapply_old2', '0/10')")
		cfg := h.config("app_slot", "p")
		cfg.Name = "app"
		err := h.runRefused(cfg)
		var slotErr *state.NoOriginSlotError
		if !errors.As(err, &slotErr) {
			t.Fatalf("run with no free replication state slot: %v", err)
		}
		for _, want := range []string{`no free replication state slot on the target for replication origin "walapply_app": all 2 (` + setting + `) are taken, by walapply_old1, walapply_old2`,
			"each walapply applier needs one for its origin, and each copy worker one more during an initial copy: raise " + setting + " on the target"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q\nlacks %q", err, want)
			}
		}
		// A copy worker's origin needs a slot of its own.
		cfg = h.config("copy_slot", "p")
		cfg.Name, cfg.Copy, cfg.CopyWorkers = "copier", true, 1
		h.source("INSERT INTO t VALUES (1)")
		if err := h.runRefused(cfg); !errors.As(err, &slotErr) || slotErr.Origin != "walapply_copy1_copier" {
			t.Errorf("copy with no free replication state slot for its worker: %v", err)
		}
	})
}

// The copy workers' origins are gone once the copy ends, also when it
// failed.
func TestCopyOriginsDropped(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, nil)
		h.both("CREATE TABLE t (id int PRIMARY KEY)", "CREATE TABLE u (id int PRIMARY KEY)")
		h.source("CREATE PUBLICATION p FOR TABLE t, u", "INSERT INTO t SELECT generate_series(1, 100)", "INSERT INTO u SELECT generate_series(1, 100)")
		// u refuses the source's row 50: the copy fails in a worker.
		h.target("ALTER TABLE u ADD CHECK (id <> 50)")
		cfg := h.config("app_slot", "p")
		cfg.Name, cfg.Copy, cfg.CopyWorkers = "app", true, 2
		if err := h.runRefused(cfg); !strings.Contains(err.Error(), "initial copy") {
			t.Fatalf("copy into a table that refuses a row: %v", err)
		}
		h.expect("SELECT roname FROM pg_replication_origin", "walapply_app")

		h.target("ALTER TABLE u DROP CONSTRAINT u_id_check")
		stop := h.runApplier(cfg)
		h.waitCopyDone(30*time.Second, nil)
		h.expect("SELECT roname FROM pg_replication_origin", "walapply_app")
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		h.compare("SELECT id::text FROM u")
	})
}
