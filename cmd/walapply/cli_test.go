package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walapply/walapply/internal/testutil"
)

// asMainEnv makes this test binary run main() instead of the tests, so
// that tests can run walapply as a process (exit codes, stdout and stderr,
// signals) without building it separately.
const asMainEnv = "GO_TEST_WALAPPLY_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// walapplyProc is walapply running as a child process.
type walapplyProc struct {
	*testutil.Process
	stdout, stderr *testutil.LogBuffer
}

// startWalapply starts walapply with args, its environment this process's
// without any WALAPPLY_* variable, plus env.
func startWalapply(t *testing.T, env []string, args ...string) *walapplyProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WALAPPLY_") && !strings.HasPrefix(kv, "NO_COLOR=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(append(cmd.Env, asMainEnv+"=1"), env...)
	p := &walapplyProc{stdout: &testutil.LogBuffer{}, stderr: &testutil.LogBuffer{}}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	proc, err := testutil.StartProcess(cmd)
	if err != nil {
		t.Fatal(err)
	}
	p.Process = proc
	t.Cleanup(proc.Kill)
	return p
}

// wait waits for the process to exit by itself and returns its exit code.
func (p *walapplyProc) wait(t *testing.T) int {
	t.Helper()
	exited, err := p.Wait(2 * time.Minute)
	if !exited {
		t.Fatalf("walapply %v still runs after 2 minutes; stderr:\n%s", p.Cmd.Args[1:], p.stderr)
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("walapply %v: %v", p.Cmd.Args[1:], err)
	}
	return testutil.ExitCode(err)
}

// term stops the process with SIGTERM and returns its exit code.
func (p *walapplyProc) term(t *testing.T) int {
	t.Helper()
	_ = p.Signal(syscall.SIGTERM)
	return p.wait(t)
}

// waitStderr waits until stderr contains substr n times.
func (p *walapplyProc) waitStderr(t *testing.T, substr string, n int) {
	t.Helper()
	deadline := time.After(time.Minute)
	for strings.Count(p.stderr.String(), substr) < n {
		select {
		case <-p.Done():
			_, err := p.Exited()
			t.Fatalf("walapply exited (%v) before logging %q %d times; stderr:\n%s", err, substr, n, p.stderr)
		case <-deadline:
			t.Fatalf("walapply did not log %q %d times within a minute; stderr:\n%s", substr, n, p.stderr)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// runWalapply runs walapply to its end.
func runWalapply(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	p := startWalapply(t, env, args...)
	code = p.wait(t)
	return p.stdout.String(), p.stderr.String(), code
}

// The command line's conventions: help on stdout with exit 0, version,
// usage errors (unknown flags, every missing required flag at once,
// unparsable values on the command line or in WALAPPLY_* variables) on
// stderr with exit 2. Runs walapply as a process; no server needed.
func TestCommandLine(t *testing.T) {
	conn := []string{"--source", "host=127.0.0.1 port=1", "--target", "host=127.0.0.1 port=1", "--slot", "s", "--publication", "p"}
	for _, tc := range []struct {
		name   string
		env    []string
		args   []string
		code   int
		stdout string // a substring; "" means stdout must be empty
		stderr string // a substring; "" means stderr must be empty
	}{
		{name: "--help", args: []string{"--help"}, stdout: "usage: walapply <command> [flags]"},
		{name: "-h", args: []string{"-h"}, stdout: "  sequences  set the target's sequences"},
		{name: "help", args: []string{"help"}, stdout: "  version    print walapply's version"},
		{name: "help run", args: []string{"help", "run"}, stdout: "usage: walapply run [flags]"},
		{name: "run -h", args: []string{"run", "-h"}, stdout: "  --copy-workers int            with --copy: how many tables (or ranges of big tables,"},
		{name: "run --help", args: []string{"run", "--help"}, stdout: "  --source string               source connection string"},
		{name: "decode -h", args: []string{"decode", "-h"}, stdout: "  --slot string"},
		{name: "status -h", args: []string{"status", "-h"}, stdout: "  --target string     target connection string (required)"},
		{name: "sequences -h", args: []string{"sequences", "-h"}, stdout: "usage: walapply sequences --source URL"},
		{name: "demo -h", args: []string{"demo", "-h"}, stdout: "  --pg int"},
		{name: "version", args: []string{"version"}, stdout: "walapply "},
		{name: "--version", args: []string{"--version"}, stdout: " (revision "},
		{name: "no command", code: 2, stderr: "usage: walapply <command> [flags]"},
		{name: "unknown command", args: []string{"rnu"}, code: 2, stderr: `walapply: unknown command "rnu"`},
		{name: "unknown flag", args: []string{"run", "--sorce", "x"}, code: 2,
			stderr: "walapply run: flag provided but not defined: -sorce; did you mean --source?\nrun 'walapply run -h' for its flags\n"},
		{name: "run without flags", args: []string{"run"}, code: 2,
			stderr: "walapply run: --source, --target, --slot and --publication are required (or set WALAPPLY_SOURCE, WALAPPLY_TARGET, WALAPPLY_SLOT and WALAPPLY_PUBLICATION)\n"},
		{name: "run, some from the environment", env: []string{"WALAPPLY_SOURCE=host=x", "WALAPPLY_SLOT=s"}, args: []string{"run"}, code: 2,
			stderr: "walapply run: --target and --publication are required (or set WALAPPLY_TARGET and WALAPPLY_PUBLICATION)\n"},
		{name: "decode without flags", args: []string{"decode"}, code: 2,
			stderr: "--source, --slot and --publication are required (or set WALAPPLY_SOURCE, WALAPPLY_SLOT and WALAPPLY_PUBLICATION)"},
		{name: "sequences without flags", args: []string{"sequences", "--publication", "p"}, code: 2,
			stderr: "--source and --target are required (or set WALAPPLY_SOURCE and WALAPPLY_TARGET)"},
		{name: "status without flags", args: []string{"status"}, code: 2, stderr: "--target is required (or set WALAPPLY_TARGET)"},
		{name: "drop without flags", args: []string{"drop"}, code: 2, stderr: "--target and --name are required (or set WALAPPLY_TARGET and WALAPPLY_NAME)"},
		{name: "blank required flag", args: []string{"status", "--target", " "}, code: 2, stderr: "--target is required"},
		{name: "integer in the environment", env: []string{"WALAPPLY_COPY_WORKERS=x"}, args: conn, code: 2,
			stderr: `walapply run: WALAPPLY_COPY_WORKERS="x": want an integer` + "\n"},
		{name: "duration in the environment", env: []string{"WALAPPLY_FEEDBACK_INTERVAL=5"}, args: conn, code: 2,
			stderr: `WALAPPLY_FEEDBACK_INTERVAL="5": want a duration such as 500ms, 10s or 1m30s`},
		{name: "bool in the environment", env: []string{"WALAPPLY_COPY=maybe"}, args: conn, code: 2,
			stderr: `WALAPPLY_COPY="maybe": want true or false`},
		{name: "env and missing at once", env: []string{"WALAPPLY_COPY_WORKERS=two"}, args: []string{"run", "--slot", "s"}, code: 2,
			stderr: `WALAPPLY_COPY_WORKERS="two": want an integer; --source, --target and --publication are required`},
		{name: "integer on the command line", args: append(conn, "--copy-workers", "x"), code: 2,
			stderr: `invalid value "x" for flag -copy-workers: want an integer`},
		{name: "stray argument", args: append(conn, "extra"), code: 2, stderr: `unexpected argument "extra"`},
		{name: "bad --log-format", args: append(conn, "--log-format", "xml"), code: 2, stderr: `--log-format "xml": want auto, json or console`},
		{name: "bad --index-memory", args: append(conn, "--index-memory", "lots"), code: 2, stderr: `--index-memory: "lots" is not a size`},
		{name: "--index-memory auto", args: append(conn, "--index-memory", "auto"), code: 2, stderr: `--index-memory: "auto" is not a size`},
		{name: "bad --on-conflict", args: append(conn, "--on-conflict", "insert_exists=ignore"), code: 2, stderr: `conflict policy "ignore" for insert_exists`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if len(args) > 0 && args[0] == "--source" {
				args = append([]string{"run"}, args...)
			}
			stdout, stderr, code := runWalapply(t, tc.env, args...)
			if code != tc.code {
				t.Errorf("exit code %d, want %d", code, tc.code)
			}
			for _, o := range []struct{ name, got, want string }{{"stdout", stdout, tc.stdout}, {"stderr", stderr, tc.stderr}} {
				if o.want == "" && o.got != "" {
					t.Errorf("%s not empty:\n%s", o.name, o.got)
				}
				if !strings.Contains(o.got, o.want) {
					t.Errorf("%s lacks %q:\n%s", o.name, o.want, o.got)
				}
			}
		})
	}
}

// Usage tables are aligned: every flag's description starts in the same
// column, continuation lines too; `walapply version` is one line.
func TestUsageAligned(t *testing.T) {
	for _, cmd := range []string{"run", "decode", "status", "sequences", "demo"} {
		stdout, _, code := runWalapply(t, nil, cmd, "-h")
		if code != 0 {
			t.Fatalf("%s -h: exit %d", cmd, code)
		}
		col := -1
		for _, line := range strings.Split(stdout, "\n") {
			var c int
			switch {
			case strings.HasPrefix(line, "  --"):
				m := regexp.MustCompile(`^  --\S+( \S+)? +`).FindString(line)
				if m == "" || len(m) == len(line) {
					continue // a name too long for the column: description on the next line
				}
				c = len(m)
			case strings.HasPrefix(line, "    "):
				c = len(line) - len(strings.TrimLeft(line, " "))
			default:
				continue
			}
			if col == -1 {
				col = c
			}
			if c != col {
				t.Errorf("%s -h: line %q starts its text in column %d, others in %d", cmd, line, c, col)
			}
		}
		if col == -1 {
			t.Errorf("%s -h shows no flags:\n%s", cmd, stdout)
		}
	}
	stdout, _, _ := runWalapply(t, nil, "version")
	if !regexp.MustCompile(`^walapply \S+ \(revision \S+, go1\.\d+\S*\)\n$`).MatchString(stdout) {
		t.Errorf("walapply version printed %q", stdout)
	}
}

// exitCode's mapping, in process: what main prints for each kind of end.
func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		err            error
		code           int
		stdout, stderr string
	}{
		{nil, 0, "", ""},
		{&helpRequest{text: "usage\n"}, 0, "usage\n", ""},
		{&usageError{msg: "bad"}, 2, "", "walapply x: bad\nrun 'walapply x -h' for its flags\n"},
		{&loggedError{errors.New("logged")}, 1, "", ""},
		{errors.New("boom"), 1, "", "walapply x: boom\n"},
	} {
		var so, se bytes.Buffer
		if code := exitCode(&so, &se, "x", tc.err); code != tc.code || so.String() != tc.stdout || se.String() != tc.stderr {
			t.Errorf("exitCode(%v) = %d, %q, %q; want %d, %q, %q", tc.err, code, so.String(), se.String(), tc.code, tc.stdout, tc.stderr)
		}
	}
}
