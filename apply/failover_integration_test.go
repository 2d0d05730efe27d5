package apply_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/internal/testutil"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/testenv"
)

// failoverSetup is a primary, a physical standby synchronising its
// failover slots, a target, and an applier configuration whose source
// lists both servers (target_session_attrs=read-write).
type failoverSetup struct {
	h                *harness // source: the primary
	primary, standby *testenv.Cluster
	cfg              apply.Config
}

// forEachFailoverVersion runs fn for the selected versions that
// synchronise slots to standbys (17+; make test runs 18).
func forEachFailoverVersion(t *testing.T, min int, fn func(t *testing.T, version int)) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		if version < min {
			t.Skipf("needs PostgreSQL %d or later", min)
		}
		fn(t, version)
	})
}

func newFailoverSetup(t *testing.T, version int, opts testenv.StandbyOptions, schema ...string) *failoverSetup {
	t.Helper()
	h := newHarness(t, version, nil, nil)
	h.both(schema...)
	opts.SyncSlots = true
	standby := testenv.NewStandby(t, h.pair.Source, opts)
	cfg := h.config("fo", "pub")
	cfg.Failover = true
	cfg.Source = testenv.MultiHostConnString("postgres", h.pair.Source, standby)
	return &failoverSetup{h: h, primary: h.pair.Source, standby: standby, cfg: cfg}
}

// promoted returns a harness whose source is the promoted standby; it
// shares h's running applier.
func (f *failoverSetup) promoted() *harness {
	return &harness{t: f.h.t, pair: &testenv.Pair{Source: f.standby, Target: f.h.pair.Target}, ctx: f.h.ctx, applierDone: f.h.applierDone}
}

// waitSynced waits until the standby holds a synchronised copy of slot
// whose confirmed position is at least lsn. The standby synchronises a
// slot only once the slot's catalog_xmin is one the standby protects too,
// which takes the slot's consumer decoding a running-transactions record
// written after the standby started (the primary writes one every 15
// seconds): the wait writes them. Until then the standby's copy is
// temporary (and dropped at a promotion), though marked synced.
func (f *failoverSetup) waitSynced(slot, lsn string) {
	f.h.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		f.h.exec(f.primary, `SELECT pg_log_standby_snapshot()`)
		got := f.h.rows(f.standby, fmt.Sprintf(`SELECT count(*)::text FROM pg_replication_slots
			WHERE slot_name = '%s' AND synced AND NOT temporary AND confirmed_flush_lsn >= '%s'`, slot, lsn))
		if got[0] == "1" {
			return
		}
		if time.Now().After(deadline) {
			f.h.t.Fatalf("the standby did not synchronise slot %s up to %s within a minute: %v", slot, lsn,
				f.h.rows(f.standby, `SELECT slot_name || ' ' || synced || ' ' || coalesce(confirmed_flush_lsn::text, '-') FROM pg_replication_slots`))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// failover stops the primary immediately and promotes the standby.
func (f *failoverSetup) failover() {
	f.h.t.Helper()
	ctx, cancel := context.WithTimeout(f.h.ctx, 2*time.Minute)
	defer cancel()
	if err := f.primary.StopImmediate(ctx); err != nil {
		f.h.t.Fatal(err)
	}
	if err := f.standby.Promote(ctx); err != nil {
		f.h.t.Fatal(err)
	}
}

// lsnOf runs a query returning one LSN on c.
func lsnOf(h *harness, c *testenv.Cluster, query string) protocol.LSN {
	h.t.Helper()
	l, err := protocol.ParseLSN(h.rows(c, query)[0])
	if err != nil {
		h.t.Fatal(err)
	}
	return l
}

// writer runs small transactions like pgbench's on whichever server the
// multi-host string reaches, through connection losses, until stopped:
// each inserts the writer's next event (a unique key: applying one twice
// fails the applier) and sets the writer's counter to it.
type writer struct {
	commits atomic.Int64
	stop    chan struct{}
	wg      sync.WaitGroup
}

func startWriters(t *testing.T, connString string, n int) *writer {
	w := &writer{stop: make(chan struct{})}
	for id := 1; id <= n; id++ {
		w.wg.Go(func() {
			var conn *pgx.Conn
			defer func() {
				if conn != nil {
					conn.Close(context.Background())
				}
			}()
			for {
				select {
				case <-w.stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err := func() error {
					if conn == nil {
						c, err := pgx.Connect(ctx, connString)
						if err != nil {
							return err
						}
						conn = c
					}
					_, err := conn.Exec(ctx, `WITH e AS (INSERT INTO events SELECT $1, coalesce(max(seq), 0) + 1, md5(random()::text) FROM events WHERE writer = $1 RETURNING seq)
						UPDATE counters SET n = (SELECT seq FROM e) WHERE writer = $1`, id)
					return err
				}()
				cancel()
				if err != nil {
					if conn != nil {
						conn.Close(context.Background())
						conn = nil
					}
					time.Sleep(20 * time.Millisecond) // the primary is gone, or not promoted yet
					continue
				}
				w.commits.Add(1)
				time.Sleep(time.Millisecond)
			}
		})
	}
	t.Cleanup(w.halt)
	return w
}

func (w *writer) halt() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.wg.Wait()
}

// waitCommits waits until the writers committed n more transactions.
func (w *writer) waitCommits(t *testing.T, n int64) {
	t.Helper()
	goal := w.commits.Load() + n
	deadline := time.Now().Add(2 * time.Minute)
	for w.commits.Load() < goal {
		if time.Now().After(deadline) {
			t.Fatalf("the writers committed %d transactions, want %d", w.commits.Load(), goal)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

const failoverSchema = `CREATE TABLE events (writer int, seq int, payload text, PRIMARY KEY (writer, seq));
	CREATE TABLE counters (writer int PRIMARY KEY, n int NOT NULL)`

// TestFailoverFollowed: pgbench-like writers run while the primary is
// stopped immediately and its standby (synchronising the failover slot)
// is promoted. With a multi-host source walapply reconnects to the new
// primary by itself, follows its timeline, and the target ends identical
// to it; the synchronised slot trailed what the target had applied, and
// nothing was applied twice (a second insert of an event would fail on its
// key). Later writes replicate.
func TestFailoverFollowed(t *testing.T) {
	t.Parallel()
	forEachFailoverVersion(t, 17, func(t *testing.T, version int) {
		f := newFailoverSetup(t, version, testenv.StandbyOptions{}, failoverSchema)
		h := f.h
		h.source(`INSERT INTO counters SELECT g, 0 FROM generate_series(1, 3) g`, `CREATE PUBLICATION pub FOR TABLE events, counters`)
		h.target(`INSERT INTO counters SELECT g, 0 FROM generate_series(1, 3) g`)
		// Confirmations every two seconds: the slot, and its copy on the
		// standby, trail what the target applied.
		f.cfg.FeedbackInterval = 2 * time.Second
		h.runApplier(f.cfg)
		h.waitCaughtUp("fo", time.Minute) // the slot exists: nothing written from here on is missed
		w := startWriters(t, testenv.MultiHostConnString("postgres", f.primary, f.standby), 3)
		w.waitCommits(t, 300)
		f.waitSynced("fo", "0/0")
		w.waitCommits(t, 300)
		// Fail over while the standby's copy of the slot trails what the
		// target applied: what lies between is sent again, or skipped by
		// the walsender, from the origin's progress.
		deadline := time.Now().Add(time.Minute)
		for lsnOf(h, f.standby, `SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'fo'`) >=
			lsnOf(h, h.pair.Target, `SELECT pg_replication_origin_progress('walapply_fo', true)`) {
			if time.Now().After(deadline) {
				t.Fatal("the standby's copy of the slot never trailed the target")
			}
			time.Sleep(10 * time.Millisecond)
		}

		f.failover()
		synced := lsnOf(h, f.standby, `SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'fo'`)
		applied := lsnOf(h, h.pair.Target, `SELECT pg_replication_origin_progress('walapply_fo', true)`)
		t.Logf("at the promotion the standby's copy of the slot was confirmed to %s, the target had applied up to %s", synced, applied)
		if synced >= applied {
			t.Logf("the slot's copy caught up with the target just before the primary stopped")
		}
		w.waitCommits(t, 300) // on the new primary
		w.halt()

		p := f.promoted()
		p.waitCaughtUp("fo", 2*time.Minute)
		p.compare(tableRows("events", ""))
		p.compare(tableRows("counters", ""))
		if tl := h.rows(h.pair.Target, `SELECT source_timeline::text FROM walapply.appliers WHERE name = 'fo'`); tl[0] != "2" {
			t.Errorf("walapply.appliers.source_timeline is %s, want 2", tl[0])
		}
		p.source(`INSERT INTO events VALUES (0, 1, 'after')`)
		p.waitCaughtUp("fo", time.Minute)
		p.expect(`SELECT payload FROM events WHERE writer = 0`, "after")
		if n := p.compare(tableRows("events", "")); n < 900 {
			t.Errorf("%d events, want at least 900", n)
		}
	})
}

// TestFailoverLaggingStandbyRefused: a standby whose WAL receiver was
// stopped (and whose primary does not wait for it) is promoted after
// walapply applied more than it has: the applier stops with a permanent
// error naming both positions, and the target keeps what it had.
func TestFailoverLaggingStandbyRefused(t *testing.T) {
	t.Parallel()
	forEachFailoverVersion(t, 17, func(t *testing.T, version int) {
		f := newFailoverSetup(t, version, testenv.StandbyOptions{NoStandbyWait: true}, `CREATE TABLE t (id int PRIMARY KEY)`)
		h := f.h
		h.source(`CREATE PUBLICATION pub FOR TABLE t`)
		h.runApplier(f.cfg)
		h.waitCaughtUp("fo", time.Minute) // the slot exists: nothing written from here on is missed
		h.source(`INSERT INTO t SELECT generate_series(1, 100)`)
		h.waitCaughtUp("fo", time.Minute)
		f.waitSynced("fo", h.rows(f.primary, `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = 'fo'`)[0])

		// The standby stops receiving; the primary goes on, and so does
		// the target.
		h.exec(f.standby, `ALTER SYSTEM SET primary_conninfo = ''`, `SELECT pg_reload_conf()`)
		deadline := time.Now().Add(time.Minute)
		for h.rows(f.standby, `SELECT count(*)::text FROM pg_stat_wal_receiver`)[0] != "0" {
			if time.Now().After(deadline) {
				t.Fatal("the standby's WAL receiver did not stop")
			}
			time.Sleep(20 * time.Millisecond)
		}
		h.source(`INSERT INTO t SELECT generate_series(101, 200)`)
		h.waitCaughtUp("fo", time.Minute)
		applied := lsnOf(h, h.pair.Target, `SELECT pg_replication_origin_progress('walapply_fo', true)`)
		before := h.rows(h.pair.Target, tableRows("t", ""))

		f.failover()
		switched := lsnOf(h, f.standby, `SELECT pg_current_wal_lsn()`)
		var err error
		select {
		case err = <-h.applierDone:
		case <-time.After(2 * time.Minute):
			t.Fatal("the applier did not stop on the diverged timeline")
		}
		if !errors.Is(err, apply.ErrDiverged) || apply.IsTransient(err) || !strings.Contains(err.Error(), applied.String()) || !strings.Contains(err.Error(), "never had") {
			t.Fatalf("want a permanent ErrDiverged naming %s, got %v", applied, err)
		}
		t.Logf("refused (the new primary's WAL is at %s): %v", switched, err)
		if after := lsnOf(h, h.pair.Target, `SELECT pg_replication_origin_progress('walapply_fo', true)`); after != applied {
			t.Errorf("origin moved from %s to %s", applied, after)
		}
		if after := h.rows(h.pair.Target, tableRows("t", "")); len(after) != len(before) || len(after) != 200 {
			t.Errorf("target has %d rows, had %d (want 200)", len(after), len(before))
		}
		if tl := h.rows(h.pair.Target, `SELECT source_timeline::text FROM walapply.appliers WHERE name = 'fo'`); tl[0] != "1" {
			t.Errorf("the refused start recorded timeline %s", tl[0])
		}
	})
}

// TestFailoverTwoPhase: transactions prepared on the primary (and on the
// target, --two-phase) before the failover are committed and rolled back
// on the new primary after it; the target follows.
func TestFailoverTwoPhase(t *testing.T) {
	t.Parallel()
	forEachFailoverVersion(t, 18, func(t *testing.T, version int) {
		f := newFailoverSetup(t, version, testenv.StandbyOptions{}, `CREATE TABLE t (id int PRIMARY KEY, v text)`)
		h := f.h
		h.source(`CREATE PUBLICATION pub FOR TABLE t`)
		f.cfg.TwoPhase = true
		h.runApplier(f.cfg)
		h.waitCaughtUp("fo", time.Minute) // the slot exists: nothing written from here on is missed
		h.source(`INSERT INTO t VALUES (1, 'before')`)
		h.waitCaughtUp("fo", time.Minute)
		// Synchronised before the transactions are prepared: an open
		// prepared transaction holds the slot's catalog_xmin back, and a
		// standby synchronises a new slot only from a catalog_xmin it
		// protects itself.
		f.waitSynced("fo", h.rows(f.primary, `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = 'fo'`)[0])
		h.source(`BEGIN`, `INSERT INTO t VALUES (2, 'committed after')`, `PREPARE TRANSACTION 'fo_commit'`,
			`BEGIN`, `INSERT INTO t VALUES (3, 'rolled back after')`, `PREPARE TRANSACTION 'fo_rollback'`)
		h.waitCaughtUp("fo", time.Minute)
		if n := h.rows(h.pair.Target, `SELECT count(*)::text FROM pg_prepared_xacts`); n[0] != "2" {
			t.Fatalf("%s transactions prepared on the target, want 2", n[0])
		}
		f.waitSynced("fo", h.rows(f.primary, `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = 'fo'`)[0])

		f.failover()
		p := f.promoted()
		p.source(`COMMIT PREPARED 'fo_commit'`, `ROLLBACK PREPARED 'fo_rollback'`, `INSERT INTO t VALUES (4, 'after')`)
		p.waitCaughtUp("fo", 2*time.Minute)
		p.expect(tableRows("t", ""), "(1,before)", `(2,"committed after")`, "(4,after)")
		p.compare(tableRows("t", ""))
		if n := h.rows(h.pair.Target, `SELECT count(*)::text FROM pg_prepared_xacts`); n[0] != "0" {
			t.Errorf("%s transactions still prepared on the target", n[0])
		}
	})
}

// TestFailoverStandbyWaitsForPromotion: pointed at a standby whose copy of
// the slot is synchronised from the primary (which cannot be streamed from
// before the promotion), walapply says so and retries instead of stopping,
// and continues once the standby is promoted.
func TestFailoverStandbyWaitsForPromotion(t *testing.T) {
	t.Parallel()
	forEachFailoverVersion(t, 17, func(t *testing.T, version int) {
		f := newFailoverSetup(t, version, testenv.StandbyOptions{}, `CREATE TABLE t (id int PRIMARY KEY)`)
		h := f.h
		h.source(`CREATE PUBLICATION pub FOR TABLE t`)
		stop := h.runApplier(f.cfg)
		h.waitCaughtUp("fo", time.Minute)
		h.source(`INSERT INTO t VALUES (1)`)
		h.waitCaughtUp("fo", time.Minute)
		f.waitSynced("fo", h.rows(f.primary, `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = 'fo'`)[0])
		if err := stop(); err != nil {
			t.Fatal(err)
		}

		log := &testutil.LogBuffer{}
		cfg := h.secConfig("fo", "pub", log)
		cfg.Source = f.standby.ConnString("postgres")
		h.runApplier(cfg)
		deadline := time.Now().Add(time.Minute)
		for !strings.Contains(log.String(), "can be streamed from only once this standby is promoted") {
			if err := h.applierStopped(); err != nil || time.Now().After(deadline) {
				t.Fatalf("no word of the standby's synchronised slot (%v); log:\n%s", err, log)
			}
			time.Sleep(20 * time.Millisecond)
		}
		h.source(`INSERT INTO t VALUES (2)`)
		for deadline := time.Now().Add(time.Minute); h.rows(f.standby, `SELECT count(*)::text FROM t`)[0] != "2"; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the standby did not replay row 2")
			}
		}
		f.failover()
		p := f.promoted()
		p.source(`INSERT INTO t VALUES (3)`)
		p.waitCaughtUp("fo", 2*time.Minute)
		p.expect(tableRows("t", ""), "(1)", "(2)", "(3)")
	})
}
