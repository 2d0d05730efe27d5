package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/testenv"
)

// statusPoll is how often the runbook asks `walapply status` whether the
// applier caught up, as a user watching it would.
const statusPoll = 500 * time.Millisecond

// child is a process run in the background: `walapply run`, pgbench.
type child struct {
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
	err     error // cmd.Wait's, once exited is closed
	// peakRSS is the highest VmHWM read (readRSS) while it ran: it cannot
	// be read after the exit, and rusage's overstates (see walapplyOnce).
	peakRSS int64
}

// startChild starts bin with args, its stdout and stderr in logPath.
func startChild(logPath, bin string, args ...string) (*child, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating %s's log file: %w", filepath.Base(bin), err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = sessionOfItsOwn()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s %s: %w", bin, args[0], err)
	}
	c := &child{cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		f.Close()
		close(c.exited)
	}()
	return c, nil
}

// running says whether the process has not exited yet.
func (c *child) running() bool {
	select {
	case <-c.exited:
		return false
	default:
		return true
	}
}

// readRSS records the process's peak resident set so far.
func (c *child) readRSS() {
	if hwm := vmHWM(c.cmd.Process.Pid); hwm > c.peakRSS {
		c.peakRSS = hwm
	}
}

// cpu is the CPU time the process spent so far (all of it once exited).
func (c *child) cpu() time.Duration {
	if !c.running() {
		return c.cmd.ProcessState.UserTime() + c.cmd.ProcessState.SystemTime()
	}
	st, _ := procStat(c.cmd.Process.Pid)
	return time.Duration(st.utime+st.stime) * time.Second / clockTicks
}

// output is the tail of its log.
func (c *child) output() string {
	b, _ := os.ReadFile(c.logPath)
	return tail(string(b), 30)
}

// kill ends the process if it still runs (a failed runbook).
func (c *child) kill() {
	if c.running() {
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
}

// writeLoad is pgbench -N writing to the source at a bounded rate.
type writeLoad struct {
	*child
	started time.Time
}

// startWrites starts PostgreSQL 15's pgbench -N (an UPDATE of
// pgbench_accounts and an INSERT into pgbench_history per transaction)
// at opts.Rate transactions per second, until stopped.
// Its output goes to pgbench.log in dir.
func startWrites(ctx context.Context, source *testenv.Cluster, opts RunbookOptions, dir string) (*writeLoad, error) {
	bin, err := testenv.Tool(schemaSourceVersion, "pgbench")
	if err != nil {
		return nil, err
	}
	c, err := startChild(filepath.Join(dir, "pgbench.log"), bin, "-h", "127.0.0.1", "-p", fmt.Sprint(source.Port()), "-U", "postgres",
		"-n", "-N", "-M", "prepared", "-c", fmt.Sprint(opts.Clients), "-j", fmt.Sprint(opts.Clients),
		"-R", fmt.Sprint(opts.Rate), "-T", "86400", benchDB)
	if err != nil {
		return nil, err
	}
	return &writeLoad{child: c, started: time.Now()}, ctx.Err()
}

// stop interrupts pgbench, waits until its backends are gone from the
// source (so that no write commits after the cut-over's position), and
// returns how many transactions it committed (one pgbench_history row
// each; the table is empty before) and for how long it wrote.
func (w *writeLoad) stop(ctx context.Context, source *testenv.Cluster) (int64, time.Duration, error) {
	if !w.running() {
		return 0, 0, fmt.Errorf("pgbench stopped writing before the cut-over (%v):\n%s", w.err, w.output())
	}
	_ = w.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-w.exited:
	case <-time.After(10 * time.Second):
		w.kill()
	}
	d := time.Since(w.started)
	conn, err := source.Connect(ctx, benchDB)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close(context.Background())
	for {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgbench'`).Scan(&n); err != nil {
			return 0, 0, fmt.Errorf("waiting for pgbench's backends to end: %w", err)
		}
		if n == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	var writes int64
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pgbench_history`).Scan(&writes); err != nil {
		return 0, 0, fmt.Errorf("counting pgbench's transactions: %w", err)
	}
	return writes, d, nil
}

// statusJSON is the part of `walapply status --json` the runbook reads.
type statusJSON struct {
	Appliers []struct {
		Copy *struct {
			Complete   bool       `json:"complete"`
			FinishedAt *time.Time `json:"finished_at"`
		} `json:"initial_copy"`
		Origin struct {
			Progress string `json:"progress_lsn"`
		} `json:"origin"`
		Until *struct {
			LSN       string     `json:"lsn"`
			ReachedAt *time.Time `json:"reached_at"`
		} `json:"until"`
		Source *struct {
			CurrentLSN string `json:"current_lsn"`
			Slot       *struct {
				LagBytes *int64 `json:"lag_bytes"`
			} `json:"slot"`
		} `json:"source"`
	} `json:"appliers"`
}

// status runs `walapply status --json`.
func (e *runbookEnv) status(ctx context.Context) (*statusJSON, error) {
	cmd := exec.CommandContext(ctx, e.bin, "status", "--json", "--target", e.target, "--source", e.source)
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("walapply status: %w\n%s", err, tail(errOut.String(), 10))
	}
	var st statusJSON
	if err := json.Unmarshal(out, &st); err != nil {
		return nil, fmt.Errorf("reading walapply status --json: %w", err)
	}
	return &st, nil
}

// caughtUp is what status said when the applier had caught up.
type caughtUp struct {
	copyDone time.Duration // from the run's start to the copy's end (status's finished_at)
	mark     protocol.LSN  // the source's position when status first saw the copy complete
	lagBytes int64         // the slot's lag at that moment
}

// waitCaughtUp polls status until the copy is complete and the origin has
// passed the source's position of the first poll that saw it complete.
func (e *runbookEnv) waitCaughtUp(ctx context.Context, run *child, writes *writeLoad) (caughtUp, error) {
	var c caughtUp
	start, failures := time.Now(), 0
	for {
		run.readRSS()
		if !run.running() {
			return c, fmt.Errorf("walapply run exited before it caught up (%v); its output:\n%s", run.err, run.output())
		}
		if !writes.running() {
			return c, fmt.Errorf("pgbench stopped writing during the copy (%v):\n%s", writes.err, writes.output())
		}
		st, err := e.status(ctx)
		if err == nil && len(st.Appliers) != 1 {
			err = fmt.Errorf("walapply status shows %d appliers, want 1", len(st.Appliers))
		}
		if err != nil {
			// The applier registers itself on the target after it
			// starts: status may fail until then, not 30 times in a
			// row.
			if failures++; failures >= 30 {
				return c, err
			}
		} else if failures = 0; st.Appliers[0].Copy != nil && st.Appliers[0].Copy.Complete && st.Appliers[0].Source != nil {
			a := st.Appliers[0]
			if c.mark == 0 {
				c.copyDone = time.Since(start)
				if a.Copy.FinishedAt != nil && a.Copy.FinishedAt.After(start) {
					c.copyDone = a.Copy.FinishedAt.Sub(start)
				}
				if c.mark, err = protocol.ParseLSN(a.Source.CurrentLSN); err != nil {
					return c, fmt.Errorf("reading status's current_lsn: %w", err)
				}
				if a.Source.Slot != nil && a.Source.Slot.LagBytes != nil {
					c.lagBytes = *a.Source.Slot.LagBytes
				}
			}
			if a.Origin.Progress != "" {
				applied, err := protocol.ParseLSN(a.Origin.Progress)
				if err != nil {
					return c, fmt.Errorf("reading status's progress_lsn: %w", err)
				}
				if applied >= c.mark {
					return c, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return c, fmt.Errorf("waiting for walapply to catch up: %w; its output:\n%s", ctx.Err(), run.output())
		case <-time.After(statusPoll):
		}
	}
}

// cutOver asks the running applier to apply everything up to the
// source's current position and stop (SIGUSR1), and checks that it
// exited 0 naming the position, and that status shows it reached.
func (e *runbookEnv) cutOver(ctx context.Context, run *child) error {
	ph := e.startPhase("cut-over: SIGUSR1 (until now) to exit 0")
	before := run.cpu()
	run.readRSS()
	if err := run.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		return fmt.Errorf("sending SIGUSR1 to walapply run: %w", err)
	}
	deadline := time.After(5 * time.Minute)
wait:
	for {
		run.readRSS()
		select {
		case <-run.exited:
			break wait
		case <-deadline:
			return fmt.Errorf("walapply run did not stop within 5 minutes of SIGUSR1; its output:\n%s", run.output())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := e.endPhase(ctx, ph, run.cpu()-before); err != nil {
		return err
	}
	e.rep.PeakRSS = run.peakRSS
	b, _ := os.ReadFile(run.logPath)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "reached ") {
			e.rep.Reached = line
		}
	}
	if run.err != nil || e.rep.Reached == "" {
		return fmt.Errorf("walapply run after SIGUSR1: exit %v, no \"reached\" line; its output:\n%s", run.err, run.output())
	}
	e.logf("%s (%s)", e.rep.Reached, round(ph.Duration))
	st, err := e.status(ctx)
	if err != nil {
		return err
	}
	if len(st.Appliers) != 1 || st.Appliers[0].Until == nil || st.Appliers[0].Until.ReachedAt == nil {
		return fmt.Errorf("walapply status after the cut-over does not show the position reached")
	}
	return nil
}

// compare runs `walapply compare`; anything but exit 0 (equal) fails.
func (e *runbookEnv) compare(ctx context.Context) error {
	ph := e.startPhase("compare: row counts and checksums, both sides")
	out, cpu, err := e.oneShot(ctx, "compare", "--source", e.source, "--target", e.target,
		"--publication", runbookPublication, "--jobs", fmt.Sprint(e.opts.CopyWorkers))
	if perr := e.endPhase(ctx, ph, cpu); perr != nil && err == nil {
		err = perr
	}
	e.rep.Compare = lastLine(out)
	if err != nil {
		e.rep.CompareFailed = true
		return fmt.Errorf("%w: %w\n%s", ErrCompare, err, out)
	}
	e.logf("compare: %s (%s)", e.rep.Compare, round(ph.Duration))
	return nil
}

// sequences runs `walapply sequences` and checks pgbench_history's
// sequence on the target against the source's.
func (e *runbookEnv) sequences(ctx context.Context) error {
	ph := e.startPhase("sequences: set on the target from the source")
	out, cpu, err := e.oneShot(ctx, "sequences", "--source", e.source, "--target", e.target, "--publication", runbookPublication)
	if perr := e.endPhase(ctx, ph, cpu); perr != nil && err == nil {
		err = perr
	}
	e.rep.Sequences = lastLine(out)
	if err != nil {
		return fmt.Errorf("%w\n%s", err, out)
	}
	const q = `SELECT last_value FROM pgbench_history_id_seq`
	var values [2]int64
	for i, c := range []*testenv.Cluster{e.r.source, e.r.target} {
		conn, err := c.Connect(ctx, benchDB)
		if err != nil {
			return err
		}
		err = conn.QueryRow(ctx, q).Scan(&values[i])
		conn.Close(context.Background())
		if err != nil {
			return fmt.Errorf("reading pgbench_history_id_seq: %w", err)
		}
	}
	if values[0] != values[1] {
		return fmt.Errorf("after walapply sequences pgbench_history_id_seq is at %d on the target, %d on the source", values[1], values[0])
	}
	e.logf("sequences: %s (%s)", e.rep.Sequences, round(ph.Duration))
	return nil
}

// oneShot runs a walapply command to its end, returning its stdout, its
// CPU time, and an error with its stderr.
func (e *runbookEnv) oneShot(ctx context.Context, args ...string) (string, time.Duration, error) {
	cmd := exec.CommandContext(ctx, e.bin, args...)
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	out, err := cmd.Output()
	var cpu time.Duration
	if cmd.ProcessState != nil {
		cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	if err != nil {
		err = fmt.Errorf("walapply %s: %w\n%s", args[0], err, tail(errOut.String(), 20))
	}
	return string(out), cpu, err
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
