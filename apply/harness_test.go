package apply_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/rs/zerolog"
	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/testenv"
)

// harness is a source and target pair with helpers to run an applier
// between them and compare tables.
type harness struct {
	t    *testing.T
	pair *testenv.Pair
	ctx  context.Context
	// applierDone is closed with the in-process applier's result when it
	// returns, so waits fail fast instead of timing out.
	applierDone chan error
}

func newHarness(t *testing.T, version int, source, target map[string]string) *harness {
	t.Helper()
	return &harness{t: t, pair: testenv.NewPair(t, testenv.PairOptions{Version: version, SourceSettings: source, TargetSettings: target}), ctx: context.Background()}
}

func (h *harness) exec(c *testenv.Cluster, sqls ...string) {
	h.t.Helper()
	testenv.MustExec(h.t, c, "postgres", sqls...)
}

func (h *harness) source(sqls ...string) { h.t.Helper(); h.exec(h.pair.Source, sqls...) }
func (h *harness) target(sqls ...string) { h.t.Helper(); h.exec(h.pair.Target, sqls...) }
func (h *harness) both(sqls ...string)   { h.t.Helper(); h.source(sqls...); h.target(sqls...) }

// config returns a Config for slot and publication between the pair.
func (h *harness) config(slot string, pubs ...string) apply.Config {
	return apply.Config{
		Source:           h.pair.Source.ConnString("postgres"),
		Target:           h.pair.Target.ConnString("postgres"),
		Slot:             slot,
		CreateSlot:       true,
		Publications:     pubs,
		SpillDir:         h.t.TempDir(),
		FeedbackInterval: 100 * time.Millisecond,
		ProgressInterval: -1,
		Logger:           zerolog.New(zerolog.NewTestWriter(h.t)).Level(zerolog.InfoLevel),
	}
}

// runApplier starts apply.Run in the background; the returned function
// stops it and returns Run's error.
func (h *harness) runApplier(cfg apply.Config) (stop func() error) {
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan error, 1)
	exited := make(chan error, 1)
	h.applierDone = exited
	go func() {
		err := apply.Run(ctx, cfg)
		if ctx.Err() == nil {
			exited <- err // stopped by itself: a permanent error
		}
		done <- err
	}()
	stopped := false
	var result error
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			result = <-done
		}
		return result
	}
	h.t.Cleanup(func() { _ = stop() })
	return stop
}

// createSlot creates the slot now, so that changes made before the
// applier first connects are kept for it.
func (h *harness) createSlot(slot string) {
	h.t.Helper()
	h.source(fmt.Sprintf("SELECT pg_create_logical_replication_slot('%s', 'pgoutput')", slot))
}

// waitCaughtUp waits until the slot has confirmed everything the source
// had written when it was called.
func (h *harness) waitCaughtUp(slot string, timeout time.Duration) {
	h.t.Helper()
	if err := h.waitConfirmed(slot, timeout, h.applierStopped); err != nil {
		h.t.Fatalf("waiting for slot %s to confirm the source's position: %v", slot, err)
	}
	h.waitCopies(slot, timeout)
}

// waitCopies waits until the target's walapply.copy_state lists no
// published table of applier as pending or copied: the slot may confirm
// transactions whose changes to a table published later are set aside
// until its copy is done (Runner.WaitCaughtUp waits so too).
func (h *harness) waitCopies(applier string, timeout time.Duration) {
	h.t.Helper()
	h.pollTarget(timeout, nil, "the copies of applier "+applier, func(conn *pgx.Conn) (bool, error) {
		var n int
		err := conn.QueryRow(h.ctx, `SELECT count(*) FROM walapply.copy_state
			WHERE applier = $1 AND published AND status IN ('pending', 'copied')`, applier).Scan(&n)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // no walapply schema: nothing copied
			return true, nil
		}
		return n == 0, err
	})
}

// pollTarget checks cond on a target connection every 20ms until it holds,
// failing the test after timeout, on an error, or when the applier stops
// (the in-process one, or p if not nil); what names the wait.
func (h *harness) pollTarget(timeout time.Duration, p *applierProcess, what string, cond func(*pgx.Conn) (bool, error)) {
	h.t.Helper()
	conn, err := h.pair.Target.Connect(h.ctx, "postgres")
	if err != nil {
		h.t.Fatal(err)
	}
	defer conn.Close(h.ctx)
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond(conn)
		if err != nil {
			h.t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("waiting for %s: not done within %s", what, timeout)
		}
		if p != nil {
			if exited, err := p.exited(); exited {
				h.t.Fatalf("the applier process exited while waiting for %s: %v", what, err)
			}
		}
		select {
		case err := <-h.applierDone:
			h.t.Fatalf("the applier stopped while waiting for %s: %v", what, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// applierStopped returns why the in-process applier stopped, nil while it
// runs.
func (h *harness) applierStopped() error {
	select {
	case err := <-h.applierDone:
		if err == nil {
			err = errors.New("the applier stopped without an error")
		}
		return err
	default:
		return nil
	}
}

// waitConfirmed waits until the slot has confirmed everything the source
// had written when it was called (nil). stopped, asked between checks,
// ends the wait with its error when the applier has stopped; running out
// of time fails the test.
func (h *harness) waitConfirmed(slot string, timeout time.Duration, stopped func() error) error {
	h.t.Helper()
	conn, err := h.pair.Source.Connect(h.ctx, "postgres")
	if err != nil {
		h.t.Fatal(err)
	}
	defer conn.Close(h.ctx)
	var target string
	if err := conn.QueryRow(h.ctx, "SELECT pg_current_wal_lsn()::text").Scan(&target); err != nil {
		h.t.Fatal(err)
	}
	deadline := time.Now().Add(timeout)
	for {
		var ok *bool
		err := conn.QueryRow(h.ctx, "SELECT confirmed_flush_lsn >= $1::pg_lsn FROM pg_replication_slots WHERE slot_name = $2", target, slot).Scan(&ok)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			h.t.Fatal(err)
		}
		if ok != nil && *ok {
			return nil
		}
		if err := stopped(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("slot %s did not confirm %s within %s", slot, target, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// rows returns a table's rows as text, sorted: a multiset, so duplicates
// and missing rows both show.
func (h *harness) rows(c *testenv.Cluster, query string) []string {
	h.t.Helper()
	return rowsIn(h.t, c, "postgres", query)
}

// forEachVersionAndFormat runs fn as a subtest per PostgreSQL version and
// value format: text, then binary (--binary).
func forEachVersionAndFormat(t *testing.T, fn func(t *testing.T, version int, binary bool)) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		for _, binary := range []bool{false, true} {
			name := "text"
			if binary {
				name = "binary"
			}
			t.Run(name, func(t *testing.T) { fn(t, version, binary) })
		}
	})
}

// tableRows is the query for a table's rows as text.
func tableRows(table string, cols string) string {
	if cols == "" {
		return fmt.Sprintf("SELECT x::text FROM %s x", table)
	}
	return fmt.Sprintf("SELECT (%s)::text FROM %s", cols, table)
}

// compare checks that a query returns the same rows on source and target.
func (h *harness) compare(query string) int {
	h.t.Helper()
	src := h.rows(h.pair.Source, query)
	dst := h.rows(h.pair.Target, query)
	if !slices.Equal(src, dst) {
		h.t.Errorf("source and target differ for %s:\n%s", query, diffRows(src, dst))
	}
	return len(src)
}

// expect checks the target's rows for a query.
func (h *harness) expect(query string, want ...string) {
	h.t.Helper()
	got := h.rows(h.pair.Target, query)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		h.t.Errorf("target rows for %s:\n got %q\nwant %q", query, got, want)
	}
}

func diffRows(src, dst []string) string {
	var b strings.Builder
	count := map[string]int{}
	for _, r := range src {
		count[r]++
	}
	for _, r := range dst {
		count[r]--
	}
	n := 0
	for r, c := range count {
		if c == 0 {
			continue
		}
		if n++; n > 20 {
			b.WriteString("  ...\n")
			break
		}
		if c > 0 {
			fmt.Fprintf(&b, "  missing on target (%d): %s\n", c, r)
		} else {
			fmt.Fprintf(&b, "  extra on target (%d): %s\n", -c, r)
		}
	}
	fmt.Fprintf(&b, "  (%d rows on the source, %d on the target)", len(src), len(dst))
	return b.String()
}
