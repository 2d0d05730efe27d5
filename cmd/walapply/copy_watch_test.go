package main

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/walapply/walapply/metrics/metricstest"
	"github.com/walapply/walapply/testenv"
)

// The initial copy is visible while it runs: walapply run --copy
// --metrics-addr serves the copy's metrics (tables by state, rows and
// bytes, the rows so far of the table being copied), /readyz answers 503
// "copying N of M tables", and walapply status shows the running table's
// rows so far, rate and ETA (text and --json). The copy of big is held in
// the middle by a trigger waiting for an advisory lock the test holds.
func TestCopyWatched(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		ctx := context.Background()
		pair := testenv.NewPair(t, testenv.PairOptions{Version: version})
		for _, c := range []*testenv.Cluster{pair.Source, pair.Target} {
			statusMust(t, c.Exec(ctx, "CREATE TABLE small (id int PRIMARY KEY); CREATE TABLE big (id int PRIMARY KEY, v text)"))
		}
		statusMust(t, pair.Source.Exec(ctx, `INSERT INTO small SELECT generate_series(1, 10);
			INSERT INTO big SELECT g, repeat('v', 20) FROM generate_series(1, 5000) g; ANALYZE big;
			CREATE PUBLICATION p FOR TABLE small, big`))
		statusMust(t, pair.Target.Exec(ctx, `CREATE FUNCTION hold_copy() RETURNS trigger LANGUAGE plpgsql AS $$
			 BEGIN
			   IF NEW.id = 3000 THEN PERFORM pg_advisory_xact_lock_shared(4243); END IF;
			   RETURN NEW;
			 END $$;
			CREATE TRIGGER hold_copy BEFORE INSERT ON big FOR EACH ROW EXECUTE FUNCTION hold_copy();
			ALTER TABLE big ENABLE ALWAYS TRIGGER hold_copy`))
		lock, err := pair.Target.Connect(ctx, "postgres")
		statusMust(t, err)
		defer lock.Close(ctx)
		_, err = lock.Exec(ctx, `SELECT pg_advisory_lock(4243)`)
		statusMust(t, err)

		addrs := make(chan net.Addr, 1)
		metricsListening = func(a net.Addr) { addrs <- a }
		t.Cleanup(func() { metricsListening = func(net.Addr) {} })
		runCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		done := make(chan error, 1)
		source, target := pair.Source.ConnString(""), pair.Target.ConnString("")
		go func() {
			done <- runCmd(runCtx, []string{"--source", source, "--target", target, "--slot", "cw", "--publication", "p",
				"--copy", "--feedback-interval", "50ms", "--metrics-addr", "127.0.0.1:0", "--log-format", "json", "--log-level", "warn"})
		}()
		var base string
		select {
		case a := <-addrs:
			base = "http://" + a.String()
		case err := <-done:
			t.Fatalf("run stopped before serving metrics: %v", err)
		}
		waitMetrics := func(what string, ok func(map[string]float64) bool) map[string]float64 {
			t.Helper()
			deadline := time.Now().Add(time.Minute)
			for {
				m := metricstest.Scrape(t, base+"/metrics")
				if ok(m) {
					return m
				}
				select {
				case err := <-done:
					t.Fatalf("run stopped while waiting for %s: %v", what, err)
				case <-time.After(50 * time.Millisecond):
				}
				if time.Now().After(deadline) {
					t.Fatalf("no %s within a minute; metrics:\n%v", what, m)
				}
			}
		}
		held := waitMetrics("big's copy held", func(m map[string]float64) bool {
			// The rows so far move a 64 KiB chunk at a time (copy_pipe.go):
			// the first is told before the hold at row 3000.
			return m[`walapply_copy_tables{state="copying"}`] == 1 && m[`walapply_copy_tables{state="done"}`] == 1 &&
				m[`walapply_copy_table_rows{relation="public.big"}`] >= 1
		})
		t.Logf("held: copy_tables pending=%v copying=%v done=%v, copy_rows_total=%v, copy_table_rows{big}=%v",
			held[`walapply_copy_tables{state="pending"}`], held[`walapply_copy_tables{state="copying"}`], held[`walapply_copy_tables{state="done"}`],
			held["walapply_copy_rows_total"], held[`walapply_copy_table_rows{relation="public.big"}`])
		if held[`walapply_copy_table_rows{relation="public.big"}`] < 1 || held["walapply_copy_rows_total"] < 11 ||
			held["walapply_copy_bytes_total"] <= 0 || held[`walapply_copy_tables{state="pending"}`] != 0 {
			t.Errorf("copy metrics while big is copied: %v", held)
		}
		if code, body := metricstest.Get(t, base+"/readyz"); code != 503 || !strings.Contains(body, "copying 1 of 2 tables (1 done") {
			t.Errorf("/readyz during the copy: %d %q", code, body)
		} else {
			t.Logf("/readyz during the copy: %d %s", code, body)
		}

		// The copy's backend waits at row 3000 (the metrics count what was
		// sent, which may be ahead).
		for waiting := false; !waiting; time.Sleep(20 * time.Millisecond) {
			statusMust(t, lock.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted)`).Scan(&waiting))
		}
		// status, a process of its own, sees the running copy on the
		// target (pg_stat_progress_copy) and the estimate on the source.
		text, _, err := runStatus(ctx, "--target", target, "--source", source)
		statusMust(t, err)
		t.Logf("status during the copy:\n%s", text)
		for _, want := range []string{"RUNNING: 1 of 2 tables done (10 rows), 1 being copied now",
			`"public"."big"  COPYING: 2999 rows so far`, "of about 5000", "left"} {
			if !strings.Contains(text, want) {
				t.Errorf("status during the copy lacks %q", want)
			}
		}
		rep := statusJSON(t, ctx, "--target", target, "--source", source)
		var big *tableProgress
		for _, tb := range rep.Appliers[0].Tables {
			if tb.Name == "big" {
				big = tb.Copying
			}
		}
		if big == nil || big.Rows != 2999 || big.Bytes <= 0 || big.EstimatedRows == nil || *big.EstimatedRows != 5000 ||
			big.ETASeconds == nil || !rep.Appliers[0].Copy.Running {
			t.Errorf("status --json during the copy: big %+v, initial_copy %+v", big, rep.Appliers[0].Copy)
		}

		_, err = lock.Exec(ctx, `SELECT pg_advisory_unlock(4243)`)
		statusMust(t, err)
		after := waitMetrics("the copy's end", func(m map[string]float64) bool {
			return m["walapply_connected"] == 1 && m[`walapply_copy_tables{state="done"}`] == 2
		})
		if after["walapply_copy_rows_total"] != 5010 || after[`walapply_copy_tables{state="copying"}`] != 0 {
			t.Errorf("copy metrics after the copy: %v", after)
		}
		if _, ok := after[`walapply_copy_table_rows{relation="public.big"}`]; ok {
			t.Errorf("walapply_copy_table_rows after the copy: %v", after)
		}
		rep = statusJSON(t, ctx, "--target", target)
		if c := rep.Appliers[0].Copy; c == nil || !c.Complete || c.Running {
			t.Errorf("status --json after the copy: %+v", c)
		}
		cancel()
		statusMust(t, <-done)
	})
}
