package testenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperEnv marks the subprocess that TestHelperProcess serves.
const helperEnv = "WALAPPLY_TESTENV_HELPER"

// TestHelperProcess is not a test: run by startHelper in a subprocess, it
// starts a cluster, prints where it is and waits to be signalled.
func TestHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("helper for the interruption tests; it runs only in their subprocess")
	}
	c, err := Start(context.Background(), Options{})
	if err != nil {
		fmt.Println("HELPER error", err)
		os.Exit(1)
	}
	fmt.Printf("HELPER %s %d\n", c.dir, c.proc.Load().cmd.Process.Pid)
	time.Sleep(10 * time.Minute)
	os.Exit(1)
}

// startHelper runs TestHelperProcess in a subprocess and returns it with
// its cluster directory and postmaster.
func startHelper(t *testing.T) (*exec.Cmd, string, processID) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		var dir string
		var pid int
		if n, _ := fmt.Sscanf(sc.Text(), "HELPER %s %d", &dir, &pid); n == 2 {
			start, _, err := processStartTime(pid)
			if err != nil {
				t.Fatalf("postmaster %d of the helper: %v", pid, err)
			}
			return cmd, dir, processID{pid: pid, start: start}
		}
		if strings.HasPrefix(sc.Text(), "HELPER") {
			t.Fatal(sc.Text())
		}
	}
	t.Fatalf("the helper exited without starting a cluster (%v)", sc.Err())
	return nil, "", processID{}
}

// waitGone waits until p has exited (a zombie counts as exited).
func waitGone(t *testing.T, p processID, what string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for p.alive() {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) still runs a minute later", what, p.pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A SIGTERM to a test process stops its servers and removes their
// directories, and the process still dies of SIGTERM.
func TestSignalRemovesClusters(t *testing.T) {
	t.Parallel()
	cmd, dir, postmaster := startHelper(t)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("helper ended with %v, want death by SIGTERM", cmd.ProcessState)
	}
	if postmaster.alive() {
		t.Errorf("postmaster %d outlived the signal handler", postmaster.pid)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cluster directory %s left behind (stat: %v)", dir, err)
	}
}

// A test process killed outright takes its servers with it (parent-death
// signal); the next sweep removes the directories it left.
func TestKilledOwnerIsSwept(t *testing.T) {
	t.Parallel()
	cmd, dir, postmaster := startHelper(t)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	waitGone(t, postmaster, "the postmaster of a killed test process")
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the killed process's cluster directory should still be there before the sweep: %v", err)
	}
	sweep(filepath.Dir(dir))
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("sweep left %s (stat: %v)", dir, err)
	}
}

// A server still running in a dead process's directory is shut down by the
// sweep before the directory goes.
func TestSweepStopsOrphanedServer(t *testing.T) {
	t.Parallel()
	SkipShort(t)
	c, err := Start(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pid := c.proc.Load().cmd.Process.Pid
	start, _, err := processStartTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	// Hand the running cluster to a process that no longer exists. The
	// postmaster works relative to its data directory, which moves along.
	orphan := filepath.Join(filepath.Dir(c.dir), fmt.Sprintf("%d-1-orphan", dead.Process.Pid))
	if err := os.Rename(c.dir, orphan); err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(orphan)
	sweep(filepath.Dir(c.dir))
	if (processID{pid: pid, start: start}).alive() {
		t.Error("sweep returned while the orphaned server still runs")
	}
	if _, err := os.Stat(orphan); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("sweep left %s (stat: %v)", orphan, err)
	}
}
