package apply_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/testenv"
)

// The Go API as a user's test uses it: up to the comparison, this is the
// README's "In your tests" example with a DELETE added.
func TestStartWaitCaughtUp(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		ctx := context.Background()
		pair := testenv.NewPair(t, testenv.PairOptions{Version: version})
		for _, c := range []*testenv.Cluster{pair.Source, pair.Target} {
			must(t, c.Exec(ctx, "CREATE TABLE orders (id int PRIMARY KEY, total numeric)"))
		}
		must(t, pair.Source.Exec(ctx, "CREATE PUBLICATION shop FOR TABLE orders"))
		r, err := apply.Start(ctx, apply.Config{Source: pair.Source.ConnString(""), Target: pair.Target.ConnString(""),
			Slot: "shop", CreateSlot: true, Publications: []string{"shop"}})
		must(t, err)
		defer r.Stop()
		must(t, pair.Source.Exec(ctx, "INSERT INTO orders SELECT g, g * 1.5 FROM generate_series(1, 1000) g"))
		must(t, pair.Source.Exec(ctx, "DELETE FROM orders WHERE id % 7 = 0"))
		must(t, r.WaitCaughtUp(ctx)) // the target now has every order the source had

		h := &harness{t: t, pair: pair, ctx: ctx}
		if n := h.compare(tableRows("orders", "")); n != 1000-142 {
			t.Errorf("%d rows compared, want %d", n, 1000-142)
		}
		if err := r.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
		if err := r.Stop(); err != nil {
			t.Errorf("a second Stop: %v", err)
		}
	})
}

// WaitCaughtUp stops waiting when the applier stops, and says why it waited
// when its context ends; Start returns the first connection's error.
func TestWaitCaughtUpFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t, 0, nil, nil)
	h.both("CREATE TABLE t (id int PRIMARY KEY)")
	h.source("CREATE PUBLICATION p FOR TABLE t")
	cfg := h.config("s", "p")

	t.Run("first connection fails", func(t *testing.T) {
		bad := cfg
		bad.Target = "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=5"
		r, err := apply.Start(ctx, bad)
		if err == nil {
			r.Stop()
			t.Fatal("Start succeeded against a target that does not listen")
		}
		if !strings.Contains(err.Error(), "connecting to the target") {
			t.Errorf("Start: %v; want the target connection's error", err)
		}
	})

	t.Run("slot missing", func(t *testing.T) {
		wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		err := apply.WaitCaughtUp(wctx, cfg.Source, "no_such_slot")
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "does not exist") {
			t.Errorf("WaitCaughtUp on a missing slot: %v; want the deadline, saying the slot does not exist", err)
		}
	})

	t.Run("applier stopped", func(t *testing.T) {
		r, err := apply.Start(ctx, cfg)
		must(t, err)
		h.source("INSERT INTO t VALUES (1)")
		must(t, r.WaitCaughtUp(ctx))
		must(t, r.Stop())
		select {
		case <-r.Done():
		default:
			t.Fatal("Done is not closed after Stop")
		}
		h.source("INSERT INTO t VALUES (2)")
		err = r.WaitCaughtUp(ctx)
		if !errors.Is(err, apply.ErrStopped) {
			t.Fatalf("WaitCaughtUp after Stop: %v; want ErrStopped", err)
		}
		// The replication connection string works too (its replication
		// parameter is dropped for the queries).
		wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		err = apply.WaitCaughtUp(wctx, h.pair.Source.ReplicationConnString(""), "s")
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "has confirmed") {
			t.Errorf("WaitCaughtUp with nothing applying: %v; want the deadline, with the slot's position", err)
		}
	})
}

// The observer sees a session connect, progress and end, in that order.
func TestObserverSequence(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t, 0, nil, nil)
	h.both("CREATE TABLE t (id int PRIMARY KEY, v text)")
	h.source("CREATE PUBLICATION p FOR TABLE t")
	rec := &recorder{}
	cfg := h.config("s", "p")
	cfg.Observer = rec
	r, err := apply.Start(ctx, cfg)
	must(t, err)
	h.source("INSERT INTO t SELECT g, 'x' FROM generate_series(1, 10) g", "UPDATE t SET v = 'y' WHERE id <= 3")
	must(t, r.WaitCaughtUp(ctx))
	h.target("DELETE FROM t WHERE id = 10")
	h.source("DELETE FROM t WHERE id = 10")
	must(t, r.WaitCaughtUp(ctx))
	// Ended by the source: a transient error, then a new session.
	h.source("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = 's'")
	h.source("INSERT INTO t VALUES (11, 'z')")
	must(t, r.WaitCaughtUp(ctx))
	must(t, r.Stop())

	ev := rec.events
	if len(ev) < 4 || ev[0] != "connected" {
		t.Fatalf("events %q: want connected first", ev)
	}
	var seq []string
	for _, e := range ev {
		if len(seq) == 0 || seq[len(seq)-1] != e {
			seq = append(seq, e)
		}
	}
	want := []string{"connected", "observe", "ended reconnect", "connected", "observe"}
	if strings.Join(seq, ",") != strings.Join(want, ",") {
		t.Errorf("events %q: want the runs of %q", seq, want)
	}
	if len(rec.stats) != 2 || rec.stats[0] == rec.stats[1] {
		t.Fatalf("%d distinct Stats: want one per session, 2", len(rec.stats))
	}
	first := rec.stats[0]
	if got := first.Inserts.Load(); got != 10 {
		t.Errorf("first session: %d inserts, want 10", got)
	}
	if got := first.Conflicts.Get("delete_missing"); got != 1 {
		t.Errorf("first session: %d delete_missing conflicts, want 1", got)
	}
	if got := rec.stats[1].Inserts.Load(); got != 1 {
		t.Errorf("second session: %d inserts, want 1", got)
	}
	last := rec.last
	if !last.CaughtUp || last.LagBytes != 0 || last.Lag != 0 || !last.LagKnown {
		t.Errorf("last observation %+v: want caught up without lag", last)
	}
	if last.Flushed < last.Applied || last.Applied == 0 {
		t.Errorf("last observation: applied %s, flushed %s", last.Applied, last.Flushed)
	}
}

// recorder is an Observer that keeps what it saw. Run calls it from one
// goroutine; the test reads it after Stop.
type recorder struct {
	events []string
	stats  []*apply.Stats
	last   apply.Observation
}

func (r *recorder) Connected(start protocol.LSN) { r.events = append(r.events, "connected") }

func (r *recorder) Observe(o apply.Observation) {
	r.events = append(r.events, "observe")
	if len(r.stats) == 0 || r.stats[len(r.stats)-1] != o.Stats {
		r.stats = append(r.stats, o.Stats)
	}
	r.last = o
}

func (r *recorder) SessionEnded(err error, reconnect bool) {
	if reconnect {
		r.events = append(r.events, "ended reconnect")
	} else {
		r.events = append(r.events, "ended stop")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
