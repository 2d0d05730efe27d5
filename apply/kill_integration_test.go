package apply_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/walapply/walapply/testenv"
)

var (
	binaryOnce sync.Once
	binaryPath string
	binaryErr  error
)

// walapplyBinary builds cmd/walapply once per test binary: the kill tests
// need a process of its own to SIGKILL. Under -short the test skips
// instead (testenv.SkipShort).
func walapplyBinary(tb testing.TB) string {
	tb.Helper()
	testenv.SkipShort(tb)
	binaryOnce.Do(func() {
		dir, err := os.MkdirTemp("", "walapply-bin-")
		if err != nil {
			binaryErr = err
			return
		}
		binaryPath = filepath.Join(dir, "walapply")
		out, err := exec.Command("go", "build", "-o", binaryPath, "github.com/walapply/walapply/cmd/walapply").CombinedOutput()
		if err != nil {
			binaryErr = fmt.Errorf("building walapply: %v\n%s", err, out)
		}
	})
	if binaryErr != nil {
		tb.Fatal(binaryErr)
	}
	return binaryPath
}

// applierProcess runs walapply as a child process, its output in a file.
type applierProcess struct {
	childProcess
	log *os.File
}

func (h *harness) applierProcess(slot, pub string, extra ...string) *applierProcess {
	bin := walapplyBinary(h.t)
	logf, err := os.Create(filepath.Join(h.t.TempDir(), "walapply.log"))
	if err != nil {
		h.t.Fatal(err)
	}
	args := append([]string{"run", "--source", h.pair.Source.ConnString("postgres"), "--target", h.pair.Target.ConnString("postgres"),
		"--slot", slot, "--publication", pub, "--feedback-interval", "100ms", "--log-format", "json",
		"--spill-dir", filepath.Join(h.t.TempDir(), "spill")}, extra...)
	p := &applierProcess{childProcess: childProcess{t: h.t, args: append([]string{bin}, args...), out: logf}, log: logf}
	h.t.Cleanup(func() {
		p.kill()
		logf.Close()
		if h.t.Failed() {
			if b, err := os.ReadFile(logf.Name()); err == nil {
				tail := b
				if len(tail) > 8000 {
					tail = tail[len(tail)-8000:]
				}
				h.t.Logf("walapply log (tail):\n%s", tail)
			}
		}
	})
	return p
}

// pgbench runs the TPC-B-like workload on the source: clients × txns.
func (h *harness) pgbench(ctx context.Context, clients, txns int) error {
	bin, err := testenv.Tool(h.pair.Source.Version(), "pgbench")
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, bin, "-n", "-c", strconv.Itoa(clients), "-j", "2", "-t", strconv.Itoa(txns), h.pair.Source.ConnString("postgres"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgbench: %v\n%s", err, out)
	}
	return nil
}

// pgbenchChunks runs clients × perClient transactions in chunks, retrying a
// chunk that failed because the source was restarted under it. A failed
// chunk may have committed part of its transactions; the total is checked
// afterwards from pgbench_history, one row per transaction.
func (h *harness) pgbenchChunks(clients, perClient int) error {
	const chunk = 500
	deadline := time.Now().Add(5 * time.Minute)
	for done := 0; done < perClient; {
		if err := h.pgbench(context.Background(), clients, chunk); err != nil {
			if time.Now().After(deadline) {
				return err
			}
			time.Sleep(200 * time.Millisecond)
			continue
		}
		done += chunk
	}
	return nil
}

func (h *harness) pgbenchInit() {
	h.t.Helper()
	bin, err := testenv.Tool(h.pair.Source.Version(), "pgbench")
	if err != nil {
		h.t.Fatal(err)
	}
	for _, c := range []*testenv.Cluster{h.pair.Source, h.pair.Target} {
		// -I dtp: tables and primary keys, no data (the data comes
		// through replication); scale 1.
		if out, err := exec.Command(bin, "-i", "-I", "dtp", "-s", "1", c.ConnString("postgres")).CombinedOutput(); err != nil {
			h.t.Fatalf("pgbench -i: %v\n%s", err, out)
		}
	}
	h.source(`ALTER TABLE pgbench_history ADD COLUMN hid bigserial PRIMARY KEY`)
	h.target(`ALTER TABLE pgbench_history ADD COLUMN hid bigint PRIMARY KEY`)
	h.source(`CREATE PUBLICATION bench FOR TABLE pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history`)
	h.createSlot("bench")
	// The initial rows, inserted after the slot exists, replicate too.
	if out, err := exec.Command(bin, "-i", "-I", "g", "-s", "1", h.pair.Source.ConnString("postgres")).CombinedOutput(); err != nil {
		h.t.Fatalf("pgbench -i -I g: %v\n%s", err, out)
	}
}

func (h *harness) compareBench() int {
	h.t.Helper()
	n := 0
	for _, tbl := range []string{"pgbench_accounts", "pgbench_branches", "pgbench_tellers", "pgbench_history"} {
		n += h.compare(tableRows(tbl, ""))
	}
	return n
}

// faultLoop runs fault() at random intervals until the workload ends, at
// least min times, and returns how many it ran.
func faultLoop(t *testing.T, workload <-chan error, min int, fault func(i int)) int {
	t.Helper()
	n := 0
	for {
		select {
		case err := <-workload:
			if err != nil {
				t.Fatal(err)
			}
			for n < min {
				fault(n)
				n++
			}
			return n
		case <-time.After(time.Duration(300+rand.IntN(1200)) * time.Millisecond):
			if n < 3*min {
				fault(n)
				n++
			}
		}
	}
}

// TestExactlyOnceUnderFire runs a pgbench workload while the applier is
// SIGKILLed, the target is stopped in immediate mode, or the source is
// restarted, at random moments; afterwards every table must match row for
// row: nothing missing, nothing twice.
func TestExactlyOnceUnderFire(t *testing.T) {
	t.Parallel()
	testenv.SkipShort(t)
	const clients, perClient = 4, 5000 // 20k transactions
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		for _, fault := range []string{"kill-applier", "stop-target", "restart-source"} {
			t.Run(fault, func(t *testing.T) {
				h := newHarness(t, version, nil, nil)
				h.pgbenchInit()
				p := h.applierProcess("bench", "bench")
				p.start()
				workload := make(chan error, 1)
				go func() { workload <- h.pgbenchChunks(clients, perClient) }()
				ctx := context.Background()
				faults := faultLoop(t, workload, 5, func(i int) {
					switch fault {
					case "kill-applier":
						p.kill()
						p.start()
					case "stop-target":
						if err := h.pair.Target.StopImmediate(ctx); err != nil {
							t.Fatal(err)
						}
						time.Sleep(time.Duration(rand.IntN(500)) * time.Millisecond)
						if err := h.pair.Target.Start(ctx); err != nil {
							t.Fatal(err)
						}
					case "restart-source":
						if i%2 == 0 {
							if err := h.pair.Source.Restart(ctx); err != nil {
								t.Fatal(err)
							}
						} else {
							if err := h.pair.Source.StopImmediate(ctx); err != nil {
								t.Fatal(err)
							}
							if err := h.pair.Source.Start(ctx); err != nil {
								t.Fatal(err)
							}
						}
					}
				})
				h.waitCaughtUp("bench", 3*time.Minute)
				p.stop()
				rows := h.compareBench()
				txns := len(h.rows(h.pair.Source, "SELECT hid::text FROM pgbench_history"))
				if txns < clients*perClient {
					t.Errorf("only %d pgbench transactions committed, want %d", txns, clients*perClient)
				}
				t.Logf("PostgreSQL %d, %s: %d faults, %d transactions, %d rows compared, all equal", version, fault, faults, txns, rows)
			})
		}
	})
}
