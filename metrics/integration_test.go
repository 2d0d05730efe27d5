package metrics_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"
	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/metrics"
	"github.com/walapply/walapply/metrics/metricstest"
	"github.com/walapply/walapply/testenv"
)

// A real applier with its metrics served over HTTP: the values move as
// changes are applied, conflicts and reconnects are counted, spill files
// show while a streamed transaction is open, and the probes answer.
func TestMetricsOverHTTP(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		ctx := context.Background()
		pair := testenv.NewPair(t, testenv.PairOptions{Version: version,
			SourceSettings: map[string]string{"logical_decoding_work_mem": "64kB"}})
		for _, c := range []*testenv.Cluster{pair.Source, pair.Target} {
			must(t, c.Exec(ctx, "CREATE TABLE t (id int PRIMARY KEY, v text)"))
		}
		must(t, pair.Source.Exec(ctx, "CREATE PUBLICATION p FOR TABLE t"))

		c := metrics.New(metrics.Options{})
		base := serve(t, c)
		if code, body := metricstest.Get(t, base+"/readyz"); code != 503 || !strings.Contains(body, "not connected") {
			t.Errorf("/readyz before the applier runs: %d %q", code, body)
		}
		r, err := apply.Start(ctx, apply.Config{
			Source: pair.Source.ConnString(""), Target: pair.Target.ConnString(""),
			Slot: "s", CreateSlot: true, Publications: []string{"p"}, Streaming: "on",
			SpillDir: t.TempDir(), FeedbackInterval: 50 * time.Millisecond, ProgressInterval: -1,
			Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel), Observer: c,
		})
		must(t, err)
		defer r.Stop()
		m := &metricsWatcher{t: t, url: base + "/metrics", r: r}

		before := m.wait("the first progress report", func(v map[string]float64) bool { return v["walapply_connected"] == 1 && v["walapply_caught_up"] == 1 })
		if before[`walapply_rows_total{operation="insert"}`] != 0 || before[`walapply_conflicts_total{kind="update_missing"}`] != 0 {
			t.Errorf("counters before any change: %v", before)
		}

		// One at a time, so that no two of them share a target transaction
		// (group commit), where they could be folded into fewer statements.
		for _, sql := range []string{
			"INSERT INTO t SELECT g, 'v' FROM generate_series(1, 50) g",
			"UPDATE t SET v = 'w' WHERE id <= 20",
			"DELETE FROM t WHERE id > 45",
		} {
			must(t, pair.Source.Exec(ctx, sql))
			must(t, r.WaitCaughtUp(ctx))
		}
		// Rows the target lost: the source's changes to them are conflicts.
		must(t, pair.Target.Exec(ctx, "DELETE FROM t WHERE id IN (1, 2, 3)"))
		must(t, pair.Source.Exec(ctx, "UPDATE t SET v = 'x' WHERE id IN (1, 2)"))
		must(t, r.WaitCaughtUp(ctx))
		must(t, pair.Source.Exec(ctx, "DELETE FROM t WHERE id = 3"))
		lsn := currentLSN(t, pair.Source)
		must(t, r.WaitCaughtUp(ctx))
		after := m.wait("the confirmation of the changes", func(v map[string]float64) bool {
			return v["walapply_confirmed_lsn"] >= lsn && v["walapply_caught_up"] == 1
		})
		for k, want := range map[string]float64{
			`walapply_rows_total{operation="insert"}`:         50,
			`walapply_rows_total{operation="update"}`:         22,
			`walapply_rows_total{operation="delete"}`:         6,
			`walapply_transactions_total{outcome="applied"}`:  5,
			`walapply_conflicts_total{kind="update_missing"}`: 2,
			`walapply_conflicts_total{kind="delete_missing"}`: 1,
			`walapply_lag_bytes`:                              0,
			`walapply_lag_seconds`:                            0,
			`walapply_ready`:                                  1,
			`walapply_reconnects_total`:                       0,
		} {
			if after[k] != want {
				t.Errorf("%s = %v, want %v", k, after[k], want)
			}
		}
		if after["walapply_applied_lsn"] <= before["walapply_applied_lsn"] || after["walapply_received_lsn"] < after["walapply_applied_lsn"] {
			t.Errorf("positions: before applied %v; after received %v applied %v", before["walapply_applied_lsn"], after["walapply_received_lsn"], after["walapply_applied_lsn"])
		}
		if ts := after["walapply_last_commit_timestamp_seconds"]; ts < float64(time.Now().Add(-time.Hour).Unix()) {
			t.Errorf("walapply_last_commit_timestamp_seconds = %v, want the last source commit's time", ts)
		}
		if code, body := metricstest.Get(t, base+"/readyz"); code != 200 {
			t.Errorf("/readyz caught up: %d %q", code, body)
		}
		if code, _ := metricstest.Get(t, base+"/healthz"); code != 200 {
			t.Errorf("/healthz: %d", code)
		}

		// A streamed transaction in progress sits in a spill file.
		src, err := pair.Source.Connect(ctx, "postgres")
		must(t, err)
		defer src.Close(ctx)
		tx, err := src.Begin(ctx)
		must(t, err)
		_, err = tx.Exec(ctx, "INSERT INTO t SELECT g, repeat('s', 100) FROM generate_series(1000, 5000) g")
		must(t, err)
		m.wait("a spill file", func(v map[string]float64) bool {
			return v["walapply_spill_files"] == 1 && v["walapply_spill_bytes"] > 64<<10
		})
		must(t, tx.Commit(ctx))
		must(t, r.WaitCaughtUp(ctx))
		m.wait("the spill file's removal", func(v map[string]float64) bool {
			return v["walapply_spill_files"] == 0 && v[`walapply_rows_total{operation="insert"}`] == 50+4001
		})

		// The source ends the session: counted, then replicating again,
		// with the counters carried over.
		must(t, pair.Source.Exec(ctx, "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = 's'"))
		m.wait("the reconnect", func(v map[string]float64) bool {
			return v["walapply_reconnects_total"] >= 1 && v["walapply_connected"] == 1
		})
		must(t, pair.Source.Exec(ctx, "INSERT INTO t VALUES (6000, 'after')"))
		must(t, r.WaitCaughtUp(ctx))
		final := m.wait("the insert after the reconnect", func(v map[string]float64) bool {
			return v[`walapply_rows_total{operation="insert"}`] == 50+4001+1
		})
		if final[`walapply_errors_total{kind="transient"}`] < 1 || final[`walapply_errors_total{kind="permanent"}`] != 0 {
			t.Errorf("errors after the source ended the session: transient %v, permanent %v",
				final[`walapply_errors_total{kind="transient"}`], final[`walapply_errors_total{kind="permanent"}`])
		}
		if final[`walapply_conflicts_total{kind="update_missing"}`] != 2 {
			t.Errorf("update_missing after the reconnect: %v, want 2 (carried over)", final[`walapply_conflicts_total{kind="update_missing"}`])
		}
	})
}

// metricsWatcher scrapes until a condition holds, failing if the applier
// stops first. Without a limit of its own the test's deadline is it.
type metricsWatcher struct {
	t     *testing.T
	url   string
	r     *apply.Runner
	limit time.Duration // how long each wait may take; 0: until near the test's deadline
}

func (m *metricsWatcher) wait(what string, ok func(map[string]float64) bool) map[string]float64 {
	m.t.Helper()
	// Give up shortly before the test binary's deadline, to show the
	// metrics instead of a stack dump.
	var giveUp <-chan time.Time
	if d, set := m.t.Deadline(); set {
		giveUp = time.After(time.Until(d) * 9 / 10)
	}
	if m.limit > 0 {
		giveUp = time.After(m.limit)
	}
	for {
		v := metricstest.Scrape(m.t, m.url)
		if ok(v) {
			return v
		}
		select {
		case <-m.r.Done():
			m.t.Fatalf("the applier stopped while waiting for %s: %v; last metrics:\n%v", what, m.r.Err(), walapplyOnly(v))
		case <-giveUp:
			m.t.Fatalf("still waiting for %s after %v (or near the test's deadline); last metrics:\n%v", what, m.limit, walapplyOnly(v))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func walapplyOnly(v map[string]float64) string {
	var b strings.Builder
	for k, x := range v {
		if strings.HasPrefix(k, "walapply_") {
			fmt.Fprintf(&b, "  %s %v\n", k, x)
		}
	}
	return b.String()
}

func currentLSN(t *testing.T, c *testenv.Cluster) float64 {
	t.Helper()
	conn, err := c.Connect(context.Background(), "postgres")
	must(t, err)
	defer conn.Close(context.Background())
	var lsn int64
	must(t, conn.QueryRow(context.Background(), "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint").Scan(&lsn))
	return float64(lsn)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

var _ = pgx.ErrNoRows
