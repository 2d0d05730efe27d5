package metrics_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/metrics"
	"github.com/walapply/walapply/testenv"
)

// The series for seeing stalls and for knowing what runs, from a real
// applier: build and applier info, every conflict kind at 0 before any
// conflict, the target commit, COPY-insert and missing-row counters, and
// the receipt times of the last message and keepalive, which advance as
// the source sends.
func TestMetricsStallsAndInfo(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		ctx := context.Background()
		pair := testenv.NewPair(t, testenv.PairOptions{Version: version})
		for _, c := range []*testenv.Cluster{pair.Source, pair.Target} {
			must(t, c.Exec(ctx, "CREATE TABLE t (id int PRIMARY KEY, v text)"))
		}
		must(t, pair.Source.Exec(ctx, "CREATE PUBLICATION p FOR TABLE t"))
		c := metrics.New(metrics.Options{Applier: metrics.ApplierInfo{Name: "app", Slot: "s", Publications: []string{"p"}}})
		base := serve(t, c)
		started := time.Now()
		r, err := apply.Start(ctx, apply.Config{
			Source: pair.Source.ConnString(""), Target: pair.Target.ConnString(""), Name: "app",
			Slot: "s", CreateSlot: true, Publications: []string{"p"},
			FeedbackInterval: 50 * time.Millisecond, ProgressInterval: -1,
			Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel), Observer: c,
		})
		must(t, err)
		defer r.Stop()
		m := &metricsWatcher{t: t, url: base + "/metrics", r: r, limit: 30 * time.Second}

		first := m.wait("the first progress report", func(v map[string]float64) bool { return v["walapply_caught_up"] == 1 })
		for _, kind := range []string{"insert_exists", "update_exists", "update_missing", "delete_missing", "skipped_by_user"} {
			if v, ok := first[`walapply_conflicts_total{kind="`+kind+`"}`]; !ok || v != 0 {
				t.Errorf("conflicts of kind %s before any conflict: %v (present %v), want 0", kind, v, ok)
			}
		}
		for _, k := range []string{"walapply_target_commits_total", "walapply_rows_inserted_with_copy_total", "walapply_missing_rows_total"} {
			if v, ok := first[k]; !ok || v != 0 {
				t.Errorf("%s before any change: %v (present %v), want 0", k, v, ok)
			}
		}
		if v := first[`walapply_applier_info{name="app",publications="p",slot="s"}`]; v != 1 {
			t.Errorf("walapply_applier_info{name=app,slot=s,publications=p} = %v, want 1; metrics:\n%s", v, walapplyOnly(first))
		}
		build := regexp.MustCompile(`^walapply_build_info\{goversion="go1\.[^"]+",revision="[^"]+",version="[^"]+"\}$`)
		found := false
		for k, v := range first {
			if strings.HasPrefix(k, "walapply_build_info") {
				found = found || build.MatchString(k) && v == 1
			}
		}
		if !found {
			t.Errorf("no walapply_build_info{goversion,revision,version} 1; metrics:\n%s", walapplyOnly(first))
		}

		// Two transactions a moment apart: the last message's receipt time
		// moves with each, and stays within the test's time.
		sent := func(v map[string]float64, after time.Time) bool {
			ts, ok := v["walapply_last_message_receipt_timestamp_seconds"]
			// a data message's time may be a feedback interval early
			return ok && ts >= float64(after.Add(-100*time.Millisecond).UnixNano())/1e9
		}
		before1 := time.Now()
		must(t, pair.Source.Exec(ctx, "INSERT INTO t SELECT g, 'v' FROM generate_series(1, 3) g"))
		one := m.wait("the first insert's receipt", func(v map[string]float64) bool {
			return sent(v, before1) && v[`walapply_rows_total{operation="insert"}`] == 3
		})
		time.Sleep(300 * time.Millisecond)
		before2 := time.Now()
		must(t, pair.Source.Exec(ctx, "INSERT INTO t VALUES (4, 'w')"))
		// Rows count when queued, commits when the target has committed:
		// wait for both, or a scrape between the two fails the check below.
		two := m.wait("the second insert's receipt and its target commit", func(v map[string]float64) bool {
			return sent(v, before2) && v[`walapply_rows_total{operation="insert"}`] == 4 && v["walapply_target_commits_total"] >= 2
		})
		t1, t2 := one["walapply_last_message_receipt_timestamp_seconds"], two["walapply_last_message_receipt_timestamp_seconds"]
		if t2-t1 < 0.2 || t2 > float64(time.Now().UnixNano())/1e9 {
			t.Errorf("last message receipt: %v after the first insert, %v after the second (300 ms later): want it to advance with them", t1, t2)
		}
		// The walsender asks for a reply with a keepalive when it has sent
		// everything and the applier has not confirmed it yet.
		ka := m.wait("a keepalive", func(v map[string]float64) bool {
			_, ok := v["walapply_last_keepalive_receipt_timestamp_seconds"]
			return ok
		})
		if ts := ka["walapply_last_keepalive_receipt_timestamp_seconds"]; ts < float64(started.UnixNano())/1e9 || ts > ka["walapply_last_message_receipt_timestamp_seconds"] {
			t.Errorf("last keepalive receipt %v: want after the start (%v) and at most the last message's (%v)",
				ts, float64(started.Unix()), ka["walapply_last_message_receipt_timestamp_seconds"])
		}

		// A heartbeat on the source (WAL that publishes nothing, as
		// docs/KUBERNETES.md suggests for an idle source) brings a keepalive.
		time.Sleep(100 * time.Millisecond)
		beat := time.Now()
		must(t, pair.Source.Exec(ctx, "SELECT pg_logical_emit_message(false, 'heartbeat', '')"))
		m.wait("a keepalive after the heartbeat", func(v map[string]float64) bool {
			return v["walapply_last_keepalive_receipt_timestamp_seconds"] >= float64(beat.UnixNano())/1e9
		})

		// A row the target lost: a missing row, an update_missing
		// conflict, the other kinds still 0.
		must(t, pair.Target.Exec(ctx, "DELETE FROM t WHERE id = 1"))
		must(t, pair.Source.Exec(ctx, "UPDATE t SET v = 'x' WHERE id = 1"))
		after := m.wait("the missing row", func(v map[string]float64) bool { return v["walapply_missing_rows_total"] == 1 })
		for kind, want := range map[string]float64{"update_missing": 1, "insert_exists": 0, "update_exists": 0, "delete_missing": 0} {
			if got := after[`walapply_conflicts_total{kind="`+kind+`"}`]; got != want {
				t.Errorf("conflicts of kind %s: %v, want %v", kind, got, want)
			}
		}
	})
}
