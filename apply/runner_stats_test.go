package apply_test

import (
	"context"
	"testing"
	"time"

	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/testenv"
)

// TestRunnerStats: a Runner tells its positions and counters without an
// Observer, adding up its sessions across a reconnect, and StopContext
// stops it within its bound.
func TestRunnerStats(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		ctx := context.Background()
		h := newHarness(t, version, nil, nil)
		h.both("CREATE TABLE t (id int PRIMARY KEY, v text)")
		h.source("CREATE PUBLICATION p FOR TABLE t")
		h.target("INSERT INTO t VALUES (100, 'target')")
		cfg := h.config("s", "p")
		var err error
		if cfg.Conflicts, err = apply.ParseConflictPolicies("insert_exists=skip"); err != nil {
			t.Fatal(err)
		}
		r, err := apply.Start(ctx, cfg)
		must(t, err)
		defer r.Stop()
		if s := r.Stats(); !s.Connected || s.Sessions != 1 || s.Rows != 0 {
			t.Errorf("right after Start: %+v; want connected, one session, no rows", s)
		}

		// waitFlushed waits until the snapshot confirms the source's
		// current position.
		waitFlushed := func(what string) apply.RunnerStats {
			t.Helper()
			lsn, err := protocol.ParseLSN(h.rows(h.pair.Source, "SELECT pg_current_wal_lsn()")[0])
			must(t, err)
			deadline := time.Now().Add(30 * time.Second)
			for {
				s := r.Stats()
				if s.CaughtUp && s.Flushed >= lsn {
					return s
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: Stats never confirmed %s: %+v", what, lsn, s)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		h.source("INSERT INTO t SELECT g, 'x' FROM generate_series(1, 10) g", "UPDATE t SET v = 'y' WHERE id <= 3",
			"INSERT INTO t VALUES (100, 'source')")
		s := waitFlushed("first session")
		if s.Applied == 0 || s.Received < s.Applied || s.TxnsApplied < 3 || s.Commits < 1 || s.Updates != 3 ||
			s.Conflicts[apply.ConflictInsertExists] != 1 || s.Rows < 13 || !s.Connected || s.Sessions != 1 {
			t.Errorf("after 3 transactions: %+v; want them applied, 3 updates, 1 insert_exists", s)
		}
		t.Logf("first session: applied %s, flushed %s, %d txns, %d commits, %d rows, conflicts %v", s.Applied, s.Flushed, s.TxnsApplied, s.Commits, s.Rows, s.Conflicts)

		// A reconnect: the new session's counters add to the first's.
		h.target("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE 'walapply % apply'")
		h.source("INSERT INTO t SELECT g, 'z' FROM generate_series(11, 15) g")
		deadline := time.Now().Add(30 * time.Second)
		for r.Stats().Sessions < 2 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		s2 := waitFlushed("second session")
		if s2.Sessions != 2 || s2.Updates != 3 || s2.Rows < s.Rows+5 || s2.TxnsApplied <= s.TxnsApplied ||
			s2.Conflicts[apply.ConflictInsertExists] != 1 || s2.Flushed <= s.Flushed {
			t.Errorf("after a reconnect: %+v; want the first session's counts plus 5 rows, over 2 sessions", s2)
		}

		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := r.StopContext(sctx); err != nil {
			t.Fatalf("StopContext: %v", err)
		}
		if s3 := r.Stats(); s3.Connected || s3.Rows != s2.Rows || s3.Sessions != 2 {
			t.Errorf("after Stop: %+v; want not connected, the counts kept", s3)
		}
	})
}
