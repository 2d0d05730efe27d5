package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/testenv"
)

// pollInterval is how often the target is asked for the marker row: small
// against the shortest drains measured (about a second), cheap for the
// target (one index lookup).
const pollInterval = 10 * time.Millisecond

// errNoMarker is returned when the drain timed out.
var errNoMarker = errors.New("bench: the marker row did not reach the target")

// drainBuiltin subscribes the target to the backlog and waits for the
// marker. The time includes CREATE SUBSCRIPTION and the worker's start,
// as walapply's includes its process start.
// For the copy workload the subscription copies the data itself
// (copy_data = true, its own slot) and the wait is for every table ready.
func (r *runEnv) drainBuiltin(ctx context.Context, w workload, timeout time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := r.target.Connect(ctx, r.db)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	streaming := "off"
	if w.streamed {
		streaming = r.streaming
	}
	create := fmt.Sprintf(`CREATE SUBSCRIPTION bench CONNECTION %s PUBLICATION %s WITH (create_slot = false, slot_name = '%s', copy_data = false, streaming = %s)`,
		quoteLiteral(r.source.ConnString(r.db)), publication, slotName, streaming)
	if w.initialCopy {
		create = fmt.Sprintf(`CREATE SUBSCRIPTION bench CONNECTION %s PUBLICATION %s WITH (copy_data = true, streaming = off)`,
			quoteLiteral(r.source.ConnString(r.db)), publication)
	}
	start := time.Now()
	if r.schema {
		if err := r.restoreSchema(ctx); err != nil {
			return 0, err
		}
	}
	if _, err := conn.Exec(ctx, create); err != nil {
		return 0, fmt.Errorf("creating the subscription: %w", err)
	}
	lastCheck := time.Now()
	err = r.waitDrained(ctx, w, conn, builtinCopyDone, func() error {
		if time.Since(lastCheck) < 500*time.Millisecond {
			return nil
		}
		lastCheck = time.Now()
		var errs int64
		if err := conn.QueryRow(ctx, `SELECT coalesce(sum(apply_error_count), 0) FROM pg_stat_subscription_stats`).Scan(&errs); err != nil {
			return fmt.Errorf("reading the subscription's error count: %w", err)
		}
		if errs > 0 {
			return fmt.Errorf("the subscription's apply worker failed; target log:\n%s", errorLines(r.target.Log()))
		}
		return nil
	})
	d := time.Since(start)
	if err == nil {
		err = r.drained(0)
	}
	if err != nil {
		return 0, err
	}
	return d, nil
}

// waitDrained waits for the marker row, and for a copy workload first for
// copied to say the copy finished.
func (r *runEnv) waitDrained(ctx context.Context, w workload, conn *pgx.Conn, copied func(context.Context, *pgx.Conn) (bool, error), check func() error) error {
	if w.initialCopy {
		return waitCopied(ctx, conn, copied, check)
	}
	return waitMarker(ctx, conn, check)
}

// errorLines returns the last ERROR lines of a server log.
func errorLines(log string, err error) string {
	if err != nil {
		return "(cannot read the log: " + err.Error() + ")"
	}
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "ERROR") || strings.Contains(l, "FATAL") {
			out = append(out, l)
		}
	}
	return tail(strings.Join(out, "\n"), 10)
}

// waitMarker polls the target until the marker row is there. check runs
// between polls and ends the wait with its error.
func waitMarker(ctx context.Context, conn *pgx.Conn, check func() error) error {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		var found bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+markerTable+` WHERE id = 1)`).Scan(&found); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("%w: %w", errNoMarker, ctx.Err())
			}
			return fmt.Errorf("looking for the marker row on the target: %w", err)
		}
		if found {
			return nil
		}
		if err := check(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", errNoMarker, ctx.Err())
		case <-t.C:
		}
	}
}

// drainWalapply runs walapply until the marker is on the target. A
// streamed workload asks for --streaming on; if this walapply refuses it
// (it does not apply streamed transactions yet), it runs again with
// --streaming off, which the note records.
func (h *harness) drainWalapply(ctx context.Context, r *runEnv, w workload) (d time.Duration, rss int64, note string, err error) {
	streaming := ""
	if w.streamed && !userSetsStreaming(h.opts.WalapplyFlags) {
		streaming = h.opts.Streaming
		if h.noStreaming {
			streaming = "off"
		}
	}
	d, rss, out, err := h.walapplyOnce(ctx, r, w, streaming)
	if err != nil && streaming != "off" && refusedStreaming(out) {
		h.noStreaming = true
		streaming = "off"
		d, rss, _, err = h.walapplyOnce(ctx, r, w, streaming)
	}
	if streaming == "off" {
		note = "walapply --streaming off (it refused --streaming on: streamed transactions not applied yet)"
	}
	return d, rss, note, err
}

func userSetsStreaming(flags []string) bool {
	for _, f := range flags {
		f = strings.TrimLeft(f, "-")
		if f == "streaming" || strings.HasPrefix(f, "streaming=") {
			return true
		}
	}
	return false
}

// refusedStreaming tells from walapply's output that it stopped because it
// does not support the streaming mode asked for.
func refusedStreaming(out string) bool {
	return strings.Contains(out, "--streaming") && strings.Contains(out, "not yet supported")
}

// walapplyOnce runs walapply as a child process until the marker appears,
// then stops it with SIGTERM. It returns the drain time, the peak RSS and
// walapply's output. The peak RSS is VmHWM read just before SIGTERM.
// For the copy workload it runs with --copy --create-slot and waits for
// the copy to finish as well.
func (h *harness) walapplyOnce(ctx context.Context, r *runEnv, w workload, streaming string) (time.Duration, int64, string, error) {
	ctx, cancel := context.WithTimeout(ctx, h.opts.DrainTimeout)
	defer cancel()
	conn, err := r.target.Connect(ctx, r.db)
	if err != nil {
		return 0, 0, "", err
	}
	defer conn.Close(context.Background())

	args := []string{"run", "--source", r.source.ConnString(r.db), "--target", r.target.ConnString(r.db),
		"--slot", slotName, "--publication", publication}
	if streaming != "" {
		args = append(args, "--streaming", streaming)
	}
	if w.initialCopy {
		args = append(args, "--copy", "--create-slot", "--copy-workers", strconv.Itoa(h.opts.CopyWorkers))
		if r.schema {
			pgDump, err := testenv.Tool(schemaSourceVersion, "pg_dump")
			if err != nil {
				return 0, 0, "", err
			}
			args = append(args, "--schema", "--index-workers", strconv.Itoa(h.opts.CopyWorkers), "--pg-dump", pgDump)
		}
	}
	args = append(args, h.opts.WalapplyFlags...)
	logPath := filepath.Join(r.dir, "walapply.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return 0, 0, "", fmt.Errorf("creating walapply's log file: %w", err)
	}
	defer logFile.Close()
	cmd := exec.Command(h.walapplyBin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Never outlive the harness, even when it is killed; run in a session
	// of its own, as a service does (sessionOfItsOwn).
	cmd.SysProcAttr = sessionOfItsOwn()
	output := func() string {
		b, _ := os.ReadFile(logPath)
		return tail(string(b), 30)
	}

	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, 0, "", fmt.Errorf("starting %s: %w", h.walapplyBin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	err = r.waitDrained(ctx, w, conn, walapplyCopyDone, func() error {
		select {
		case werr := <-exited:
			exited <- werr
			return fmt.Errorf("walapply exited before the marker arrived (%v); its output:\n%s", werr, output())
		default:
			return nil
		}
	})
	d := time.Since(start)
	hwm := vmHWM(cmd.Process.Pid)
	if h.opts.KeepLogs != "" {
		defer keepLog(h.opts, logPath, fmt.Sprintf("%s-pg%d-%s.log", w.name, r.version, time.Now().Format("150405")))
	}
	if err == nil {
		err = r.drained(cmd.Process.Pid)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
	if err != nil {
		return 0, 0, output(), err
	}
	rss := hwm
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok && rss == 0 {
		// Only a fallback: Linux carries the high-water mark of the
		// memory the child had before exec (with Go's vfork-style
		// start, the harness's own) into ru_maxrss, so it overstates.
		rss = ru.Maxrss * 1024 // kilobytes on Linux
	}
	return d, rss, output(), nil
}

// vmHWM reads a process's peak resident set ("VmHWM" in
// /proc/<pid>/status) in bytes; 0 if it cannot.
func vmHWM(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "VmHWM:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0
			}
			return kb * 1024
		}
	}
	return 0
}

// buildWalapply builds ./cmd/walapply of the module in modDir into dir.
func buildWalapply(ctx context.Context, modDir, dir string) (string, error) {
	bin := filepath.Join(dir, "walapply")
	cmd := exec.CommandContext(ctx, goTool(), "build", "-o", bin, "./cmd/walapply")
	cmd.Dir = modDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("bench: building walapply in %s: %w\n%s", modDir, err, out)
	}
	return bin, nil
}

// buildWalapplyAt builds ./cmd/walapply as committed at rev (a commit of
// the repository in modDir), from a `git archive` copy in dir: the working
// tree may be mid-edit, and the figures then belong to exactly one commit.
// It returns the binary and the full commit hash.
func buildWalapplyAt(ctx context.Context, modDir, rev, dir string) (bin, commit string, err error) {
	out, err := exec.CommandContext(ctx, "git", "-C", modDir, "rev-parse", "--verify", rev+"^{commit}").Output()
	if err != nil {
		return "", "", fmt.Errorf("bench: resolving walapply revision %q: %w", rev, err)
	}
	commit = strings.TrimSpace(string(out))
	src := filepath.Join(dir, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		return "", "", fmt.Errorf("bench: creating the source directory of revision %s: %w", rev, err)
	}
	archive := exec.CommandContext(ctx, "git", "-C", modDir, "archive", "--format=tar", commit)
	untar := exec.CommandContext(ctx, "tar", "-x", "-C", src)
	if untar.Stdin, err = archive.StdoutPipe(); err != nil {
		return "", "", err
	}
	var errOut bytes.Buffer
	archive.Stderr, untar.Stderr = &errOut, &errOut
	if err := untar.Start(); err != nil {
		return "", "", fmt.Errorf("bench: extracting revision %s: %w", rev, err)
	}
	aerr := archive.Run()
	uerr := untar.Wait()
	if err := errors.Join(aerr, uerr); err != nil {
		return "", "", fmt.Errorf("bench: extracting revision %s (git archive | tar): %w\n%s", rev, err, errOut.String())
	}
	bin, err = buildWalapply(ctx, src, dir)
	return bin, commit, err
}

// moduleDir finds the root of the module of the working directory.
func moduleDir(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, goTool(), "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("bench: finding the walapply module (go env GOMOD): %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("bench: the working directory is not inside the walapply module; run from the repository or set the module directory")
	}
	return filepath.Dir(gomod), nil
}

// goTool is the go command: from PATH, else from GOROOT.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if root := os.Getenv("GOROOT"); root != "" {
		return filepath.Join(root, "bin", "go")
	}
	return "go"
}

// keepLog copies walapply's log of a drain into Options.KeepLogs as name
// (for reading where a drain's time went: the copy's phases are logged);
// a failure is only logged.
func keepLog(opts Options, path, name string) {
	b, err := os.ReadFile(path)
	if err == nil {
		err = os.WriteFile(filepath.Join(opts.KeepLogs, name), b, 0o644)
	}
	if err != nil {
		logf(opts.Log, "keeping walapply's log: %v", err)
	}
}
