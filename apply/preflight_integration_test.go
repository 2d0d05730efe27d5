package apply_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/testenv"
)

// Tests of the preflight (apply/preflight.go, DESIGN.md invariant 10): a
// start that fails creates nothing on either side, and a publication that
// goes missing stops the applier instead of being confirmed past.

// runBriefly runs the applier for d, long enough for a few transient
// retries, and returns Run's result; a permanent error returns earlier.
func runBriefly(cfg apply.Config, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return apply.Run(ctx, cfg)
}

// expectUntouched fails the test if the applier name left anything on the
// target (its origin, a walapply.appliers row) or any slot on the source.
func (h *harness) expectUntouched(t *testing.T, source *testenv.Cluster, name string) {
	t.Helper()
	if slots := h.rows(source, `SELECT slot_name::text FROM pg_replication_slots`); len(slots) != 0 {
		t.Errorf("slots left on the source: %q", slots)
	}
	if origins := h.rows(h.pair.Target, `SELECT roname::text FROM pg_replication_origin`); len(origins) != 0 {
		t.Errorf("origins left on the target: %q", origins)
	}
	if h.rows(h.pair.Target, `SELECT (to_regclass('walapply.appliers') IS NULL)::text`)[0] == "true" {
		return // not even migrated
	}
	if rows := h.rows(h.pair.Target, `SELECT name FROM walapply.appliers`); len(rows) != 0 {
		t.Errorf("walapply.appliers rows left on the target: %q (applier %q)", rows, name)
	}
}

// expectPermanent checks that err is a permanent error saying every part
// of want.
func expectPermanent(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("the start succeeded, want a permanent error")
	}
	if apply.IsTransient(err) {
		t.Errorf("%v is transient, want permanent", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the error does not say %q:\n%v", w, err)
		}
	}
	t.Logf("refused: %v", err)
}

// TestPreflightMissingPublication: --create-slot with publications that do
// not exist is refused before anything is created, naming every missing
// publication and listing those that exist.
func TestPreflightMissingPublication(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, nil)
		h.both(`CREATE TABLE t (id int PRIMARY KEY)`)
		h.source(`CREATE PUBLICATION pub FOR TABLE t`, `CREATE PUBLICATION "Other pub" FOR TABLE t`)
		cfg := h.config("s", "pub", "p18typo", "also_missing")
		err := secRun(t, cfg)
		expectPermanent(t, err, `publications "p18typo", "also_missing" do not exist in source database "postgres"`,
			`which has "Other pub", "pub"`, "nothing was created")
		var pe *apply.PreflightError
		if !errors.As(err, &pe) {
			t.Errorf("%v is not a *apply.PreflightError", err)
		}
		h.expectUntouched(t, h.pair.Source, "s")
	})
}

// TestPreflightLeavesNothing: a wrong password, a refused port, a missing
// slot without --create-slot, --copy into a target that lacks a table and
// a source without wal_level = logical each stop (or keep retrying)
// without leaving anything on the target or the source.
func TestPreflightLeavesNothing(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := secHarness(t, testenv.Options{Version: version, HBA: pwHBA}, testenv.Options{Version: version})
		h.both(`CREATE TABLE t (id int PRIMARY KEY)`)
		h.source(`CREATE PUBLICATION pub FOR TABLE t`, "CREATE ROLE walpw LOGIN REPLICATION SUPERUSER PASSWORD 'right'")

		t.Run("wrong password", func(t *testing.T) {
			cfg := h.config("s", "pub")
			cfg.Source = secUserURL(h.pair.Source, "walpw", "wrong")
			expectPermanent(t, secRun(t, cfg), "walpw")
			h.expectUntouched(t, h.pair.Source, "s")
		})
		t.Run("refused port", func(t *testing.T) {
			cfg := h.config("s", "pub")
			cfg.Source = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=2", deadPort(t))
			if err := runBriefly(cfg, 2*time.Second); err != nil {
				t.Errorf("a refused source port should be retried until stopped, got %v", err)
			}
			h.expectUntouched(t, h.pair.Source, "s")
		})
		t.Run("missing slot and publication", func(t *testing.T) { // every problem at once
			cfg := h.config("nope", "pub", "typo")
			cfg.CreateSlot = false
			expectPermanent(t, secRun(t, cfg), "cannot start, 2 problems", `publication "typo" does not exist`,
				`replication slot "nope" does not exist on the source`, "--create-slot")
			h.expectUntouched(t, h.pair.Source, "nope")
		})
		t.Run("copy into a missing table", func(t *testing.T) {
			h.source(`CREATE TABLE u (id int PRIMARY KEY)`, `CREATE PUBLICATION pub_u FOR TABLE t, u`)
			cfg := h.config("s", "pub_u")
			cfg.Copy = true
			expectPermanent(t, secRun(t, cfg), `published table(s) missing on the target: "public"."u"`, "nothing was created")
			h.expectUntouched(t, h.pair.Source, "s")
			if copies := h.rows(h.pair.Target, `SELECT applier FROM walapply.copies`); len(copies) != 0 {
				t.Errorf("walapply.copies rows left on the target: %q", copies)
			}
		})
		t.Run("wal_level replica", func(t *testing.T) {
			replica := testenv.NewCluster(t, testenv.Options{Version: version, Settings: map[string]string{"wal_level": "replica"}})
			h.exec(replica, `CREATE TABLE t (id int PRIMARY KEY)`, `CREATE PUBLICATION pub FOR TABLE t`)
			cfg := h.config("s", "pub")
			cfg.Source = replica.ConnString("postgres")
			expectPermanent(t, secRun(t, cfg), "wal_level = replica", "wal_level = logical", "restart the source")
			h.expectUntouched(t, replica, "s")
		})
	})
}

// TestPreflightDropsCreatedSlot: a start that created the slot and then
// cannot go on (here: the spill directory cannot be created, which is
// retried) drops the slot again when it is stopped before it replicated.
func TestPreflightDropsCreatedSlot(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, nil)
		h.both(`CREATE TABLE t (id int PRIMARY KEY)`)
		h.source(`CREATE PUBLICATION pub FOR TABLE t`)
		file := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(file, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := h.config("s", "pub")
		cfg.SpillDir = filepath.Join(file, "spill") // under a regular file: cannot be created
		stop := h.runApplier(cfg)
		deadline := time.Now().Add(30 * time.Second)
		for len(h.rows(h.pair.Source, `SELECT slot_name::text FROM pg_replication_slots`)) == 0 {
			if time.Now().After(deadline) {
				t.Fatal("the applier did not create its slot")
			}
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(500 * time.Millisecond) // a retry or two, which keep the slot
		if err := stop(); err != nil {
			t.Fatalf("stopping: %v", err)
		}
		if slots := h.rows(h.pair.Source, `SELECT slot_name::text FROM pg_replication_slots`); len(slots) != 0 {
			t.Errorf("the slot this start created is still on the source: %q", slots)
		}
	})
}

// TestPublicationDroppedWhileRunning: a publication dropped while the
// applier streams stops it with a permanent error naming the publication,
// and confirms nothing past the change the source did not send for it
// (PostgreSQL 15 to 17 end the stream with an error; 18 only warns). The
// next start is refused by the preflight. A publication created after the
// slot's position (it exists, but not at that point of the WAL) stops the
// applier too, saying so.
func TestPublicationDroppedWhileRunning(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, nil)
		h.both(`CREATE TABLE t (id int PRIMARY KEY)`)
		h.source(`CREATE PUBLICATION pub FOR TABLE t`)

		t.Run("dropped", func(t *testing.T) {
			h.createSlot("s")
			cfg := h.config("s", "pub")
			h.runApplier(cfg)
			h.source(`INSERT INTO t VALUES (1)`)
			h.waitCaughtUp("s", time.Minute)
			h.source(`DROP PUBLICATION pub`)
			before := h.rows(h.pair.Source, `SELECT pg_current_wal_lsn()::text`)[0]
			h.source(`INSERT INTO t VALUES (2)`)
			err := h.waitStopped(time.Minute)
			expectPermanent(t, err, `publication "pub" does not exist in source database "postgres"`, "nothing past that was confirmed")
			if past := h.rows(h.pair.Source, fmt.Sprintf(`SELECT (confirmed_flush_lsn > '%s')::text FROM pg_replication_slots WHERE slot_name = 's'`, before)); past[0] != "false" {
				t.Errorf("the slot confirmed past %s, where the source stopped sending the publication's changes", before)
			}
			h.expect(tableRows("t", ""), "(1)")
			// The next start: the preflight.
			var pe *apply.PreflightError
			if err := secRun(t, cfg); !errors.As(err, &pe) || !strings.Contains(err.Error(), `publication "pub" does not exist`) {
				t.Errorf("restart: %v, want the preflight's refusal naming pub", err)
			}
		})

		t.Run("created after the slot", func(t *testing.T) {
			h.createSlot("early")
			h.source(`INSERT INTO t VALUES (3)`, `CREATE PUBLICATION late FOR TABLE t`)
			h.runApplier(h.config("early", "late"))
			err := h.waitStopped(time.Minute)
			expectPermanent(t, err, `publication "late" did not exist in source database "postgres" at source LSN`, "pg_replication_slot_advance('early'")
			h.expect(tableRows("t", ""), "(1)")
		})
	})
}

// waitStopped waits until the in-process applier stops by itself and
// returns its error.
func (h *harness) waitStopped(timeout time.Duration) error {
	h.t.Helper()
	select {
	case err := <-h.applierDone:
		return err
	case <-time.After(timeout):
		h.t.Fatalf("the applier still runs after %s; want it stopped by a permanent error", timeout)
		return nil
	}
}
