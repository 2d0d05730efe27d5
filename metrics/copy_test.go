package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/metrics"
	"github.com/walapply/walapply/metrics/metricstest"
	"github.com/walapply/walapply/protocol"
)

// The copy's metrics sum over attempts (a new Started is a new attempt),
// the per-table series are there only while their copy runs, and /readyz
// says "copying N of M tables" until the session connects.
func TestCopyMetrics(t *testing.T) {
	clk := &clock{now: t0}
	c := metrics.New(metrics.Options{Now: clk.Now})
	srv := serve(t, c)
	first := apply.CopyProgress{TablesTotal: 3, TablesDone: 1, Rows: 100, Bytes: 1000, Started: t0, Elapsed: 0,
		ETA: 90 * time.Second, RangesTotal: 8, RangesDone: 3, Copying: []apply.TableCopyProgress{{Table: "public.big", Rows: 90, Bytes: 900}}}
	c.ObserveCopy(first)
	m := metricstest.Scrape(t, srv+"/metrics")
	for k, want := range map[string]float64{
		`walapply_copy_tables{state="pending"}`: 1, `walapply_copy_tables{state="copying"}`: 1, `walapply_copy_tables{state="done"}`: 1,
		`walapply_copy_rows_total`: 100, `walapply_copy_bytes_total`: 1000, `walapply_copy_table_rows{relation="public.big"}`: 90,
		`walapply_copy_estimated_seconds_remaining`: 90,
		`walapply_copy_ranges{state="pending"}`:     5, `walapply_copy_ranges{state="done"}`: 3,
	} {
		if m[k] != want {
			t.Errorf("first attempt: %s = %v, want %v", k, m[k], want)
		}
	}
	if code, body := metricstest.Get(t, srv+"/readyz"); code != 503 || !strings.Contains(body, "copying 1 of 3 tables (1 done, 100 rows copied, about 1m30s left)") {
		t.Errorf("/readyz during the copy: %d %q", code, body)
	}
	// A second attempt counts on from the first's rows; it completes.
	c.ObserveCopy(apply.CopyProgress{TablesTotal: 2, TablesDone: 2, Rows: 40, Bytes: 400, Started: t0.Add(time.Minute), Done: true})
	c.Connected(0)
	m = metricstest.Scrape(t, srv+"/metrics")
	if m["walapply_copy_rows_total"] != 140 || m["walapply_copy_bytes_total"] != 1400 || m[`walapply_copy_tables{state="done"}`] != 2 {
		t.Errorf("after the second attempt: rows %v bytes %v done %v", m["walapply_copy_rows_total"], m["walapply_copy_bytes_total"], m[`walapply_copy_tables{state="done"}`])
	}
	if _, ok := m[`walapply_copy_table_rows{relation="public.big"}`]; ok {
		t.Errorf("walapply_copy_table_rows after the copy completed")
	}
	if _, ok := m[`walapply_copy_ranges{state="done"}`]; ok {
		t.Errorf("walapply_copy_ranges after the copy completed")
	}
}

// The last error is served with its facts, and while the command waits
// after a permanent one /readyz names them.
func TestLastError(t *testing.T) {
	clk := &clock{now: t0}
	c := metrics.New(metrics.Options{Now: clk.Now})
	srv := serve(t, c)
	if m := metricstest.Scrape(t, srv+"/metrics"); m["walapply_last_error_timestamp_seconds"] != 0 {
		t.Errorf("walapply_last_error_timestamp_seconds before any error: %v", m["walapply_last_error_timestamp_seconds"])
	}
	c.Connected(0)
	err := &apply.PermanentError{Err: &apply.TxnError{Xid: 7, CommitLSN: protocol.LSN(0x1522E58), Relation: `"public"."t"`, Op: "INSERT"}}
	c.SessionEnded(err, false)
	c.Waiting(t0.Add(5 * time.Minute))
	m := metricstest.Scrape(t, srv+"/metrics")
	info := `walapply_last_error_info{commit_lsn="0/1522E58",kind="permanent",operation="INSERT",relation="public.t",sqlstate=""}`
	if m[info] != 1 || m["walapply_last_error_timestamp_seconds"] != float64(t0.Unix()) || m["walapply_ready"] != 0 {
		t.Errorf("after the permanent error: %v", m)
	}
	clk.now = t0.Add(time.Minute)
	if code, body := metricstest.Get(t, srv+"/readyz"); code != 503 ||
		body != "stopped by a permanent error at 2025-01-02 03:04:05 UTC (INSERT on public.t, commit LSN 0/1522E58); see the log; retrying in 4m0s, or at once on SIGHUP\n" {
		t.Errorf("/readyz while waiting: %d %q", code, body)
	}
	c.Waiting(time.Time{})
	if _, why := c.Ready(); !strings.Contains(why, "not connected") {
		t.Errorf("Ready() once running again: %q", why)
	}
}
