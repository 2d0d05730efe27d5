package main

import (
	"context"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walapply/walapply/metrics/metricstest"
	"github.com/walapply/walapply/testenv"
)

// permanentErrorAlert evaluates docs/KUBERNETES.md's WalapplyPermanentError
// alert on one scrape:
//
//	walapply_ready == 0 and on(instance) walapply_last_error_info{kind="permanent"} == 1
func permanentErrorAlert(m map[string]float64) bool {
	if v, ok := m["walapply_ready"]; !ok || v != 0 {
		return false
	}
	for k, v := range m {
		if strings.HasPrefix(k, "walapply_last_error_info{") && strings.Contains(k, `kind="permanent"`) && v == 1 {
			return true
		}
	}
	return false
}

// walapply run --on-permanent-error wait stays up after a permanent error
// (a published table missing on the target), not ready, serving the error
// in its metrics: the documented alert fires on a scrape of the running
// binary. Once the table exists, SIGHUP runs the applier again: it
// applies, is ready, and the alert clears. The process exits 0 on SIGTERM.
func TestRunWaitsAfterPermanentError(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		ctx := context.Background()
		pair := testenv.NewPair(t, testenv.PairOptions{Version: version})
		statusMust(t, pair.Source.Exec(ctx, `CREATE TABLE t (id int PRIMARY KEY); CREATE PUBLICATION p FOR TABLE t`))
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		statusMust(t, err)
		addr := ln.Addr().String()
		ln.Close()
		base := "http://" + addr
		p := startWalapply(t, nil, "run", "--source", pair.Source.ConnString(""), "--target", pair.Target.ConnString(""),
			"--slot", "w", "--create-slot", "--publication", "p", "--feedback-interval", "50ms", "--log-format", "json",
			"--metrics-addr", addr, "--on-permanent-error", "wait", "--error-retry", "1h")
		p.waitStderr(t, `"message":"replicating"`, 1)
		statusMust(t, pair.Source.Exec(ctx, `INSERT INTO t VALUES (1)`))
		p.waitStderr(t, "running again in 1h0m0s, or at once on SIGHUP", 1)

		scrape := func() map[string]float64 { t.Helper(); return metricstest.Scrape(t, base+"/metrics") }
		m := scrape()
		var info []string
		for k := range m {
			if strings.HasPrefix(k, "walapply_last_error") {
				info = append(info, k+" "+strconv.FormatFloat(m[k], 'f', -1, 64))
			}
		}
		t.Logf("after the error: %s; errors_total{permanent}=%v ready=%v", strings.Join(info, "; "), m[`walapply_errors_total{kind="permanent"}`], m["walapply_ready"])
		if m[`walapply_errors_total{kind="permanent"}`] < 1 || !permanentErrorAlert(m) {
			t.Errorf("the alert does not fire after the permanent error: %v", info)
		}
		if ts := m["walapply_last_error_timestamp_seconds"]; ts < float64(time.Now().Add(-time.Minute).Unix()) {
			t.Errorf("walapply_last_error_timestamp_seconds = %v", ts)
		}
		if code, body := metricstest.Get(t, base+"/readyz"); code != 503 || !strings.Contains(body, "stopped by a permanent error") ||
			!strings.Contains(body, "public.t") || !strings.Contains(body, "on SIGHUP") {
			t.Errorf("/readyz after the permanent error: %d %q", code, body)
		} else {
			t.Logf("/readyz: %d %s", code, body)
		}
		if code, _ := metricstest.Get(t, base+"/healthz"); code != 200 {
			t.Errorf("/healthz after the permanent error: %d", code)
		}
		var rec string
		for _, l := range strings.Split(p.stderr.String(), "\n") {
			if strings.Contains(l, "running again in") {
				rec = l
			}
		}
		if !strings.Contains(rec, `"level":"error"`) || !strings.Contains(rec, `"relation":"public.t"`) {
			t.Errorf("the error's record: %s", rec)
		}

		// Fixed, and told so: it runs again, applies and is ready.
		statusMust(t, pair.Target.Exec(ctx, `CREATE TABLE t (id int PRIMARY KEY)`))
		statusMust(t, p.Signal(syscall.SIGHUP))
		p.waitStderr(t, "SIGHUP: running the applier again", 1)
		statusMust(t, pair.Source.Exec(ctx, `INSERT INTO t VALUES (2)`))
		deadline := time.Now().Add(time.Minute)
		for {
			m = scrape()
			if m["walapply_ready"] == 1 && m[`walapply_rows_total{operation="insert"}`] == 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("not ready and applied a minute after SIGHUP; stderr:\n%s", p.stderr)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if permanentErrorAlert(m) {
			t.Errorf("the alert still fires after the recovery")
		}
		if code, body := metricstest.Get(t, base+"/readyz"); code != 200 {
			t.Errorf("/readyz after the recovery: %d %q", code, body)
		}
		if code := p.term(t); code != 0 {
			t.Errorf("exit code after SIGTERM: %d; stderr:\n%s", code, p.stderr)
		}
	})
}
