package main

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/walapply/walapply/metrics/metricstest"
	"github.com/walapply/walapply/testenv"
)

// walapply run --metrics-addr serves metrics and probes while it runs, and
// stops serving when it stops.
func TestRunMetricsAddr(t *testing.T) {
	ctx := context.Background()
	pair := testenv.NewPair(t, testenv.PairOptions{})
	for _, c := range []*testenv.Cluster{pair.Source, pair.Target} {
		statusMust(t, c.Exec(ctx, "CREATE TABLE t (id int PRIMARY KEY)"))
	}
	statusMust(t, pair.Source.Exec(ctx, "CREATE PUBLICATION p FOR TABLE t"))

	addrs := make(chan net.Addr, 1)
	metricsListening = func(a net.Addr) { addrs <- a }
	t.Cleanup(func() { metricsListening = func(net.Addr) {} })
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- runCmd(runCtx, []string{"--source", pair.Source.ConnString(""), "--target", pair.Target.ConnString(""),
			"--slot", "m", "--create-slot", "--publication", "p", "--feedback-interval", "50ms",
			"--metrics-addr", "127.0.0.1:0", "--ready-max-lag", "1m", "--log-format", "json", "--log-level", "warn"})
	}()
	var base string
	select {
	case a := <-addrs:
		base = "http://" + a.String()
	case err := <-done:
		t.Fatalf("run stopped before serving metrics: %v", err)
	}
	// until reports whether the applier is still running, and waits a bit.
	until := func(what string) {
		select {
		case err := <-done:
			t.Fatalf("run stopped while waiting for %s: %v", what, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	for code, body := metricstest.Get(t, base+"/readyz"); code != 200; code, body = metricstest.Get(t, base+"/readyz") {
		if code != 503 {
			t.Fatalf("/readyz: %d %q", code, body)
		}
		until("/readyz to answer ready")
	}
	if code, body := metricstest.Get(t, base+"/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	statusMust(t, pair.Source.Exec(ctx, "INSERT INTO t SELECT generate_series(1, 10)"))
	for {
		m := metricstest.Scrape(t, base+"/metrics")
		if m[`walapply_rows_total{operation="insert"}`] == 10 && m["walapply_caught_up"] == 1 && m["walapply_connected"] == 1 {
			break
		}
		until("the inserts in the metrics")
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run after its context ended: %v", err)
	}
	if resp, err := http.Get(base + "/healthz"); err == nil {
		resp.Body.Close()
		t.Errorf("the metrics server still answers after run returned")
	}
}
