package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

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
	for code, body := httpGet(t, base+"/readyz"); code != 200; code, body = httpGet(t, base+"/readyz") {
		if code != 503 {
			t.Fatalf("/readyz: %d %q", code, body)
		}
		until("/readyz to answer ready")
	}
	if code, body := httpGet(t, base+"/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	statusMust(t, pair.Source.Exec(ctx, "INSERT INTO t SELECT generate_series(1, 10)"))
	for {
		m := promSamples(t, base+"/metrics")
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

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// promSamples reads a Prometheus text page into series -> value.
func promSamples(t *testing.T, url string) map[string]float64 {
	t.Helper()
	code, body := httpGet(t, url)
	if code != 200 {
		t.Fatalf("GET %s: %d", url, code)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if i < 0 || err != nil {
			t.Fatalf("GET %s: malformed line %q", url, line)
		}
		out[line[:i]] = v
	}
	return out
}
