package apply_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/walapply/walapply/apply"
)

// TestBacklogThroughput drains a pgbench backlog with walapply and with
// PostgreSQL's subscriber on the same kind of pair, side by side. It is a
// measurement for development (the full harness is in bench/), so it runs
// only with WALAPPLY_BENCH=1; WALAPPLY_BENCH_TXNS sets the backlog size.
func TestBacklogThroughput(t *testing.T) {
	t.Parallel()
	if os.Getenv("WALAPPLY_BENCH") == "" {
		t.Skip("a throughput measurement, not a correctness test: set WALAPPLY_BENCH=1 to run it")
	}
	txns := 20000
	if v, err := strconv.Atoi(os.Getenv("WALAPPLY_BENCH_TXNS")); err == nil {
		txns = v
	}
	for _, who := range []string{"walapply", "builtin", "walapply", "builtin"} {
		t.Run(who, func(t *testing.T) {
			h := newHarness(t, 0, nil, nil)
			h.pgbenchInit()
			// Everything before the backlog is applied first, unmeasured.
			if err := h.pgbench(context.Background(), 4, txns/4); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			switch who {
			case "walapply":
				cfg := h.config("bench", "bench")
				var last apply.Progress
				cfg.OnProgress = func(p apply.Progress) { last = p }
				stop := h.runApplier(cfg)
				h.waitCaughtUp("bench", 10*time.Minute)
				_ = stop()
				t.Logf("walapply: %d source transactions in %d target commits", last.TxnsApplied, last.Commits)
			case "builtin":
				h.target(fmt.Sprintf("CREATE SUBSCRIPTION sub CONNECTION '%s' PUBLICATION bench WITH (create_slot = false, slot_name = 'bench', copy_data = false)", h.pair.Source.ConnString("postgres")))
				h.waitCaughtUp("bench", 10*time.Minute)
			}
			d := time.Since(start)
			h.compareBench()
			t.Logf("%s drained %d pgbench transactions in %.2fs (%.0f txn/s)", who, txns, d.Seconds(), float64(txns)/d.Seconds())
			if who == "builtin" {
				h.target("ALTER SUBSCRIPTION sub DISABLE", "ALTER SUBSCRIPTION sub SET (slot_name = NONE)", "DROP SUBSCRIPTION sub")
			}
		})
	}
}

// TestBigTransactionMemory applies one non-streamed transaction of 1M rows
// with walapply as a process of its own and reports its peak RSS (VmHWM):
// a measurement, run only with WALAPPLY_BENCH=1.
func TestBigTransactionMemory(t *testing.T) {
	t.Parallel()
	if os.Getenv("WALAPPLY_BENCH") == "" {
		t.Skip("a memory measurement, not a correctness test: set WALAPPLY_BENCH=1 to run it")
	}
	h := newHarness(t, 0, nil, nil)
	h.both(`CREATE TABLE big (id int PRIMARY KEY, payload text, n numeric)`)
	h.source(`CREATE PUBLICATION big FOR TABLE big`)
	h.createSlot("big")
	h.source(`INSERT INTO big SELECT i, md5(i::text) || repeat('x', 100), i * 1.5 FROM generate_series(1, 1000000) i`)
	p := h.applierProcess("big", "big", "--streaming", "off")
	start := time.Now()
	p.start()
	h.waitCaughtUp("big", 10*time.Minute)
	d := time.Since(start)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.proc.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	p.stop()
	n := h.compare(tableRows("big", ""))
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			t.Logf("1M-row transaction (%d rows compared) applied in %.1fs; walapply peak RSS %s", n, d.Seconds(), strings.TrimSpace(strings.TrimPrefix(line, "VmHWM:")))
		}
	}
}
