package apply_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/internal/testutil"
	"github.com/walapply/walapply/testenv"
)

// BenchmarkStreamedBig applies one streamed transaction of about 1 GB of
// row data (WALAPPLY_BENCH_ROWS rows of ~264 bytes, default 4M) and reports
// walapply's peak RSS and the time from the source's COMMIT to the target's
// commit, side by side with PostgreSQL's own subscriber (streaming = on) on
// the same transaction run again. It is not part of make test:
//
//	WALAPPLY_BENCH=1 WALAPPLY_TEST_PG=18 go test ./apply -run '^$' \
//	    -bench BenchmarkStreamedBig -benchtime 1x -timeout 60m
//
// WALAPPLY_BENCH_STREAMING=parallel runs both with streaming parallel
// (walapply --streaming parallel, the subscription's streaming = parallel)
// instead of on. WALAPPLY_BENCH_CPUPROFILE=file has walapply write a CPU
// profile of its run there (--cpu-profile); WALAPPLY_BENCH_NOSUB=1 leaves
// the subscription out; WALAPPLY_BENCH_BIN=path runs that walapply binary
// instead of one built from this tree (for A/B runs).
//
// It runs on the newest version WALAPPLY_TEST_PG selects. walapply runs as
// a process of its own (built from cmd/walapply); its peak RSS is VmHWM
// from /proc just before it is stopped, and the kernel's maxrss for the
// child as a cross-check. Each consumer is alone while it runs: the
// transaction is executed once for walapply, then, with the source table
// emptied and a fresh slot, once more for the subscription, so that neither
// competes with the other for the CPUs.
func BenchmarkStreamedBig(b *testing.B) {
	if os.Getenv("WALAPPLY_BENCH") != "1" {
		b.Skip("set WALAPPLY_BENCH=1 to run it: it writes several GB and takes minutes")
	}
	rows := 4_000_000
	if s := os.Getenv("WALAPPLY_BENCH_ROWS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			b.Fatalf("WALAPPLY_BENCH_ROWS=%q: want a positive number", s)
		}
		rows = n
	}
	versions, err := testenv.Versions()
	if err != nil {
		b.Fatal(err)
	}
	version := versions[len(versions)-1]
	ctx := context.Background()
	settings := map[string]string{"max_wal_size": "2GB", "checkpoint_timeout": "30min"}
	pair := testenv.NewPair(b, testenv.PairOptions{Version: version, SourceSettings: settings, TargetSettings: settings})
	src, tgt := pair.Source, pair.Target
	const table = `CREATE TABLE big (id bigint PRIMARY KEY, payload text)`
	testenv.MustExec(b, src, "postgres", table, `CREATE PUBLICATION pub FOR TABLE big`)
	testenv.MustExec(b, tgt, "postgres", table)
	if err := tgt.CreateDatabase(ctx, "sub"); err != nil {
		b.Fatal(err)
	}
	testenv.MustExec(b, tgt, "sub", table)
	insert := fmt.Sprintf(`INSERT INTO big SELECT g, repeat(md5(g::text), 8) FROM generate_series(1, %d) g`, rows)
	dataBytes := rows * (8 + 256)
	bin := os.Getenv("WALAPPLY_BENCH_BIN")
	if bin == "" {
		bin = walapplyBinary(b)
	}
	rounds := 1
	if s := os.Getenv("WALAPPLY_BENCH_ROUNDS"); s != "" {
		if rounds, err = strconv.Atoi(s); err != nil || rounds <= 0 {
			b.Fatalf("WALAPPLY_BENCH_ROUNDS=%q: want a positive number", s)
		}
	}
	b.Logf("PostgreSQL %d, one streamed transaction of %d rows, %.2f GB of row data; %d round(s)", version, rows, float64(dataBytes)/1e9, rounds)
	b.Logf("%-9s %-14s %12s %18s %12s %14s %10s %12s", "round", "consumer", "INSERT", "COMMIT->target", "replay", "peak RSS", "CPU", "target CPU")
	var walSum, pgSum time.Duration
	var peak int64
	for round := 1; round <= rounds; round++ {
		w := benchWalapply(b, bin, src, tgt, insert, rows)
		b.Logf("%-9d %-14s %11.1fs %17.1fs %11.1fs %10.1f MiB %9.1fs %11.1fs   (maxrss %.1f MiB, spill peak %.2f GB)", round, "walapply",
			w.load.Seconds(), w.apply.Seconds(), w.replay.Seconds(), float64(w.hwm)/1024, w.cpu.Seconds(), w.backendCPU.Seconds(),
			float64(w.maxrss)/1024, float64(w.spill)/1e9)
		if os.Getenv("WALAPPLY_BENCH_NOSUB") == "1" {
			walSum += w.apply
			peak = max(peak, w.hwm)
			continue
		}
		p := benchSubscriber(b, src, tgt, insert, rows)
		b.Logf("%-9d %-14s %11.1fs %17.1fs %12s %10.1f MiB %9.1fs %12s   (apply worker, which writes the target itself; its RSS counts the shared buffers it touched)", round, "PG subscriber",
			p.load.Seconds(), p.apply.Seconds(), "", float64(p.hwm)/1024, p.cpu.Seconds(), "")
		walSum += w.apply
		pgSum += p.apply
		peak = max(peak, w.hwm)
	}
	b.ReportMetric(walSum.Seconds()/float64(rounds), "walapply-commit-s")
	b.ReportMetric(pgSum.Seconds()/float64(rounds), "pgsub-commit-s")
	b.ReportMetric(float64(peak)/1024, "walapply-peak-MiB")
}

// benchStreaming is the streaming mode of BenchmarkStreamedBig's consumers.
func benchStreaming() string {
	if os.Getenv("WALAPPLY_BENCH_STREAMING") == "parallel" {
		return "parallel"
	}
	return "on"
}

// benchResult is one consumer's run of the transaction.
type benchResult struct {
	load, apply, replay time.Duration // source INSERT; source COMMIT to target commit; walapply's replay
	hwm, maxrss, spill  int64         // KiB, KiB, bytes
	cpu, backendCPU     time.Duration // the consumer's CPU time; its target backends' (walapply)
}

// benchWalapply runs the transaction with a walapply process consuming it.
func benchWalapply(b *testing.B, bin string, src, tgt *testenv.Cluster, insert string, rows int) benchResult {
	testenv.MustExec(b, src, "postgres", `SELECT pg_create_logical_replication_slot('wal', 'pgoutput')`)
	testenv.MustExec(b, tgt, "postgres", `TRUNCATE big`)
	spill := filepath.Join(b.TempDir(), "spill")
	logPath := filepath.Join(b.TempDir(), "walapply.log")
	logf, err := os.Create(logPath)
	if err != nil {
		b.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "run", "--source", src.ConnString("postgres"), "--target", tgt.ConnString("postgres"),
		"--slot", "wal", "--publication", "pub", "--spill-dir", spill, "--streaming", benchStreaming(), "--log-format", "json")
	if prof := os.Getenv("WALAPPLY_BENCH_CPUPROFILE"); prof != "" {
		cmd.Args = append(cmd.Args, "--cpu-profile", prof)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	proc, err := testutil.StartProcess(cmd)
	if err != nil {
		b.Fatal(err)
	}
	defer proc.Kill()
	if err := src.WaitSlotActive(context.Background(), "wal", true, time.Minute); err != nil {
		log, _ := os.ReadFile(logPath)
		b.Fatalf("walapply did not start streaming: %v\n%s", err, tail(log, 4000))
	}
	stopSpill := make(chan struct{})
	spillPeak := make(chan int64, 1)
	go func() { spillPeak <- watchDirSize(spill, stopSpill) }()
	var r benchResult
	r.load, r.apply = runAndWait(b, src, insert, func(conn *pgx.Conn, before string) bool {
		return lsnAfter(b, conn, "SELECT pg_replication_origin_progress('walapply_wal', false)", before)
	}, tgt, "postgres")
	close(stopSpill)
	r.hwm = vmHWM(proc.Pid())
	if c, err := tgt.Connect(context.Background(), "postgres"); err == nil {
		// The main connection's backend and the parallel ones' (parallel
		// mode applies the transaction on those).
		rows, err := c.Query(context.Background(), `SELECT pid FROM pg_stat_activity WHERE application_name = 'walapply wal apply' OR application_name LIKE 'walapply wal parallel %'`)
		if err == nil {
			for rows.Next() {
				var pid int
				if rows.Scan(&pid) == nil {
					r.backendCPU += procCPU(pid)
				}
			}
			rows.Close()
		}
		c.Close(context.Background())
	}
	_ = proc.Signal(syscall.SIGTERM)
	if exited, err := proc.Wait(time.Minute); !exited || err != nil {
		log, _ := os.ReadFile(logPath)
		b.Fatalf("walapply (exited: %v): %v\n%s", exited, err, tail(log, 4000))
	}
	r.maxrss = cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss // KiB on Linux
	r.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	r.spill = <-spillPeak
	log, _ := os.ReadFile(logPath)
	for _, line := range strings.Split(string(log), "\n") {
		if strings.Contains(line, "replayed a streamed transaction") || strings.Contains(line, "applied a streamed transaction as it streamed") {
			var entry struct {
				Replay float64 `json:"replay_seconds"`
				Commit float64 `json:"commit_seconds"`
			}
			if json.Unmarshal([]byte(line), &entry) == nil {
				r.replay = time.Duration((entry.Replay + entry.Commit) * float64(time.Second))
			}
		}
	}
	checkCount(b, tgt, "postgres", rows)
	// walapply drop removes the slot and the applier's origin and rows, so
	// that the next round starts as a new applier (a slot created again
	// under an applier's old name is refused: changes would be missing).
	drop := exec.Command(bin, "drop", "--name", "wal", "--source", src.ConnString("postgres"), "--target", tgt.ConnString("postgres"), "--spill-dir", spill)
	if out, err := drop.CombinedOutput(); err != nil {
		b.Fatalf("walapply drop: %v\n%s", err, out)
	}
	testenv.MustExec(b, src, "postgres", `TRUNCATE big`)
	return r
}

// benchSubscriber runs the transaction with a PostgreSQL subscription
// (streaming = on) consuming it.
func benchSubscriber(b *testing.B, src, tgt *testenv.Cluster, insert string, rows int) benchResult {
	ctx := context.Background()
	testenv.MustExec(b, src, "postgres", `SELECT pg_create_logical_replication_slot('sub', 'pgoutput')`)
	testenv.MustExec(b, tgt, "sub", `TRUNCATE big`, fmt.Sprintf(`CREATE SUBSCRIPTION sub CONNECTION '%s' PUBLICATION pub
		WITH (streaming = %s, create_slot = false, slot_name = 'sub', copy_data = false)`, src.ConnString("postgres"), benchStreaming()))
	waitSlotActive(b, src, "sub", true)
	var r benchResult
	r.load, r.apply = runAndWait(b, src, insert, func(conn *pgx.Conn, before string) bool {
		return lsnAfter(b, conn, "SELECT pg_replication_origin_progress('pg_' || oid, false) FROM pg_subscription WHERE subname = 'sub'", before)
	}, tgt, "sub")
	if c, err := tgt.Connect(ctx, "sub"); err == nil {
		var pid int
		_ = c.QueryRow(ctx, `SELECT pid FROM pg_stat_subscription WHERE subname = 'sub' AND relid IS NULL`).Scan(&pid)
		r.hwm = vmHWM(pid)
		r.cpu = procCPU(pid)
		c.Close(ctx)
	}
	checkCount(b, tgt, "sub", rows)
	testenv.MustExec(b, tgt, "sub", `ALTER SUBSCRIPTION sub DISABLE`, `ALTER SUBSCRIPTION sub SET (slot_name = NONE)`, `DROP SUBSCRIPTION sub`)
	waitSlotActive(b, src, "sub", false) // the worker's walsender exits after a moment
	testenv.MustExec(b, src, "postgres", `SELECT pg_drop_replication_slot('sub')`, `TRUNCATE big`)
	return r
}

// waitSlotActive waits until the slot is (or, with active false, is no
// longer) in use by a walsender.
func waitSlotActive(tb testing.TB, c *testenv.Cluster, slot string, want bool) {
	tb.Helper()
	if err := c.WaitSlotActive(context.Background(), slot, want, time.Minute); err != nil {
		tb.Fatal(err)
	}
}

// runAndWait runs insert in a source transaction and returns how long the
// INSERT took and the time from the return of COMMIT until applied (polled
// on the target database db every 5ms) says the target has committed it.
func runAndWait(tb testing.TB, src *testenv.Cluster, insert string, applied func(*pgx.Conn, string) bool, tgt *testenv.Cluster, db string) (load, apply time.Duration) {
	tb.Helper()
	ctx := context.Background()
	conn, err := src.Connect(ctx, "postgres")
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close(ctx)
	poll, err := tgt.Connect(ctx, db)
	if err != nil {
		tb.Fatal(err)
	}
	defer poll.Close(ctx)
	if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
		tb.Fatal(err)
	}
	start := time.Now()
	if _, err := conn.Exec(ctx, insert); err != nil {
		tb.Fatal(err)
	}
	load = time.Since(start)
	var before string
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&before); err != nil {
		tb.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
		tb.Fatal(err)
	}
	committed := time.Now()
	deadline := committed.Add(30 * time.Minute)
	for !applied(poll, before) {
		if time.Now().After(deadline) {
			tb.Fatal("the target did not commit the transaction within 30 minutes")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return load, time.Since(committed)
}

// lsnAfter reports whether the LSN query returns is past before.
func lsnAfter(tb testing.TB, conn *pgx.Conn, query, before string) bool {
	tb.Helper()
	var after *bool
	if err := conn.QueryRow(context.Background(), "SELECT ("+query+") > $1::pg_lsn", before).Scan(&after); err != nil {
		tb.Fatal(err)
	}
	return after != nil && *after
}

func checkCount(tb testing.TB, c *testenv.Cluster, db string, rows int) {
	tb.Helper()
	ctx := context.Background()
	conn, err := c.Connect(ctx, db)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM big").Scan(&n); err != nil {
		tb.Fatal(err)
	}
	if n != rows {
		tb.Fatalf("database %s has %d rows, want %d", db, n, rows)
	}
}

// vmHWM returns a process's peak resident set size in KiB (0 if unknown).
func vmHWM(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return n
		}
	}
	return 0
}

// procCPU returns the user and system CPU time a process has used (0 if
// unknown), from /proc/<pid>/stat in clock ticks of 1/100 s.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name may contain spaces; the fields after it are fixed.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// watchDirSize returns the largest total size of the files in dir seen
// until stop is closed.
func watchDirSize(dir string, stop <-chan struct{}) int64 {
	var peak int64
	for {
		var total int64
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if fi, err := e.Info(); err == nil {
				total += fi.Size()
			}
		}
		peak = max(peak, total)
		select {
		case <-stop:
			return peak
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
