package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/metrics"
	"github.com/walapply/walapply/metrics/metricstest"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/state"
)

// clock is a settable time for the collector.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func TestReady(t *testing.T) {
	connected := func(c *metrics.Collector) { c.Connected(0) }
	observed := func(o apply.Observation) func(*metrics.Collector) {
		return func(c *metrics.Collector) { c.Observe(o) }
	}
	ended := func(c *metrics.Collector) { c.SessionEnded(errors.New("boom"), true) }
	stats := &apply.Stats{}
	for _, tc := range []struct {
		name  string
		steps []func(*metrics.Collector)
		ok    bool
		why   string
	}{
		{"nothing yet", nil, false, "not connected"},
		{"connected, no report", []func(*metrics.Collector){connected}, false, "no progress report yet"},
		{"caught up", []func(*metrics.Collector){connected, observed(apply.Observation{Time: t0, CaughtUp: true, LagKnown: true, Stats: stats})}, true, "caught up"},
		{"small lag", []func(*metrics.Collector){connected, observed(apply.Observation{Time: t0, Lag: 5 * time.Second, LagKnown: true, Stats: stats})}, true, "lagging 5s"},
		{"large lag", []func(*metrics.Collector){connected, observed(apply.Observation{Time: t0, Lag: 31 * time.Second, LagKnown: true, Stats: stats})}, false, "lagging 31s"},
		{"lag unknown", []func(*metrics.Collector){connected, observed(apply.Observation{Time: t0, Stats: stats})}, false, "not known"},
		{"stale report", []func(*metrics.Collector){connected, observed(apply.Observation{Time: t0.Add(-31 * time.Second), CaughtUp: true, LagKnown: true, Stats: stats})}, false, "no progress report for 31s"},
		{"session ended", []func(*metrics.Collector){connected, observed(apply.Observation{Time: t0, CaughtUp: true, LagKnown: true, Stats: stats}), ended}, false, "not connected"},
		{"reconnected, no report", []func(*metrics.Collector){connected, observed(apply.Observation{Time: t0, CaughtUp: true, LagKnown: true, Stats: stats}), ended, connected}, false, "no progress report yet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &clock{now: t0}
			c := metrics.New(metrics.Options{Now: clk.Now})
			for _, s := range tc.steps {
				s(c)
			}
			ok, why := c.Ready()
			if ok != tc.ok || !strings.Contains(why, tc.why) {
				t.Errorf("Ready() = %v, %q; want %v, containing %q", ok, why, tc.ok, tc.why)
			}
		})
	}
}

// Counters add up over sessions, each of which has its own apply.Stats,
// and are read live between observations.
func TestCountersOverSessions(t *testing.T) {
	c := metrics.New(metrics.Options{Now: func() time.Time { return t0 }})
	srv := serve(t, c)

	s1 := &apply.Stats{}
	c.Connected(protocol.LSN(100))
	s1.Inserts.Add(5)
	s1.TxnsApplied.Add(2)
	s1.Conflicts.Add("update_missing")
	c.Observe(apply.Observation{Time: t0, Stats: s1, CaughtUp: true, LagKnown: true,
		Progress: apply.Progress{Received: 0x2000, Applied: 0x1800, Flushed: 0x1000, LastCommitAt: t0.Add(-time.Second)}})
	s1.Inserts.Add(1) // after the last observation of the session: still counted
	c.SessionEnded(errors.New("connection reset"), true)

	s2 := &apply.Stats{}
	c.Connected(protocol.LSN(0x1000))
	s2.Inserts.Add(3)
	s2.Deletes.Add(4)
	s2.Truncates.Add(1)
	s2.TxnsSkipped.Add(1)
	s2.Conflicts.Add("update_missing")
	s2.Conflicts.Add("delete_missing")
	c.Observe(apply.Observation{Time: t0, Stats: s2, LagBytes: 0x800, Lag: 2 * time.Second, LagKnown: true,
		Spill: state.SpillStats{Files: 2, Bytes: 4096, Records: 9}, Spilling: true,
		Progress: apply.Progress{Received: 0x3000, Applied: 0x2800, Flushed: 0x2800}})
	s2.Updates.Add(7) // between observations: read live at the scrape

	got := metricstest.Scrape(t, srv+"/metrics")
	want := map[string]float64{
		`walapply_rows_total{operation="insert"}`:         9,
		`walapply_rows_total{operation="update"}`:         7,
		`walapply_rows_total{operation="delete"}`:         4,
		`walapply_truncates_total`:                        1,
		`walapply_transactions_total{outcome="applied"}`:  2,
		`walapply_transactions_total{outcome="skipped"}`:  1,
		`walapply_conflicts_total{kind="update_missing"}`: 2,
		`walapply_conflicts_total{kind="delete_missing"}`: 1,
		`walapply_reconnects_total`:                       1,
		`walapply_errors_total{kind="permanent"}`:         1, // errors.New is not transient
		`walapply_errors_total{kind="transient"}`:         0,
		`walapply_received_lsn`:                           0x3000,
		`walapply_applied_lsn`:                            0x2800,
		`walapply_confirmed_lsn`:                          0x2800,
		`walapply_lag_bytes`:                              0x800,
		`walapply_lag_seconds`:                            2,
		`walapply_caught_up`:                              0,
		`walapply_connected`:                              1,
		`walapply_ready`:                                  1,
		`walapply_spill_files`:                            2,
		`walapply_spill_bytes`:                            4096,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	if _, ok := got["walapply_last_commit_timestamp_seconds"]; ok {
		t.Errorf("walapply_last_commit_timestamp_seconds reported although the session has applied nothing yet")
	}
	if _, ok := got["go_goroutines"]; !ok {
		t.Errorf("the Go runtime collector is missing")
	}
}

// The probes' HTTP answers.
func TestProbes(t *testing.T) {
	clk := &clock{now: t0}
	c := metrics.New(metrics.Options{Now: clk.Now, ReadyMaxLag: 10 * time.Second})
	srv := serve(t, c)
	if code, body := metricstest.Get(t, srv+"/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, body := metricstest.Get(t, srv+"/readyz"); code != 503 || !strings.Contains(body, "not connected") {
		t.Errorf("/readyz before connecting: %d %q", code, body)
	}
	c.Connected(0)
	c.Observe(apply.Observation{Time: t0, CaughtUp: true, LagKnown: true, Stats: &apply.Stats{}})
	if code, body := metricstest.Get(t, srv+"/readyz"); code != 200 || body != "caught up\n" {
		t.Errorf("/readyz caught up: %d %q", code, body)
	}
	clk.now = t0.Add(11 * time.Second)
	if code, body := metricstest.Get(t, srv+"/readyz"); code != 503 || !strings.Contains(body, "no progress report for 11s (more than 10s)") {
		t.Errorf("/readyz with a stale report: %d %q", code, body)
	}
	resp, err := http.Post(srv+"/readyz", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /readyz: %d, want 405", resp.StatusCode)
	}
}

// serve serves c on a free port for the test and returns its base URL.
func serve(t *testing.T, c *metrics.Collector) string {
	t.Helper()
	s, err := metrics.Listen("127.0.0.1:0", c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("closing the metrics server: %v", err)
		}
	})
	return fmt.Sprintf("http://%s", s.Addr())
}

// The receipt times are the latest over sessions: a new session that has
// received nothing yet does not make them vanish or go back.
func TestReceiptTimesOverSessions(t *testing.T) {
	c := metrics.New(metrics.Options{Now: func() time.Time { return t0 }})
	srv := serve(t, c)
	got := metricstest.Scrape(t, srv+"/metrics")
	for _, k := range []string{"walapply_last_message_receipt_timestamp_seconds", "walapply_last_keepalive_receipt_timestamp_seconds", "walapply_applier_info"} {
		for series := range got {
			if strings.HasPrefix(series, k) {
				t.Errorf("%s reported before any message (or without Options.Applier): %v", series, got[series])
			}
		}
	}
	c.Connected(0)
	s1 := &apply.Stats{}
	s1.Commits.Add(3)
	s1.CopiedRows.Add(100)
	s1.MissingRows.Add(2)
	c.Observe(apply.Observation{Time: t0, Stats: s1, LastMessageAt: t0.Add(-time.Second), LastKeepaliveAt: t0.Add(-2 * time.Second)})
	c.SessionEnded(errors.New("connection reset"), true)
	c.Connected(0)
	s2 := &apply.Stats{}
	s2.Commits.Add(1)
	c.Observe(apply.Observation{Time: t0, Stats: s2})
	got = metricstest.Scrape(t, srv+"/metrics")
	for k, want := range map[string]float64{
		"walapply_last_message_receipt_timestamp_seconds":   float64(t0.Unix() - 1),
		"walapply_last_keepalive_receipt_timestamp_seconds": float64(t0.Unix() - 2),
		"walapply_target_commits_total":                     4,
		"walapply_rows_inserted_with_copy_total":            100,
		"walapply_missing_rows_total":                       2,
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v", k, got[k], want)
		}
	}
}
