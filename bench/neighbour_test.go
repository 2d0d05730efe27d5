package bench

import (
	"context"
	"errors"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestParseNeighbour(t *testing.T) {
	for in, want := range map[string]int{"": 0, "off": 0, "0": 0, "3": 3, "cores": runtime.NumCPU()} {
		if got, err := ParseNeighbour(in); err != nil || got != want {
			t.Errorf("ParseNeighbour(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"-1", "many"} {
		if _, err := ParseNeighbour(bad); !errors.Is(err, ErrOptions) {
			t.Errorf("ParseNeighbour(%q): %v, want ErrOptions", bad, err)
		}
	}
}

// TestNeighboursBusyAndBounded: a neighbour process burns CPU while it
// runs, stop ends it, and the time limit ends it without stop.
func TestNeighboursBusyAndBounded(t *testing.T) {
	nb, err := startNeighbours(context.Background(), 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	pid := nb.cmds[0].Process.Pid
	time.Sleep(300 * time.Millisecond)
	st, ok := procStat(pid)
	nb.stop()
	if !ok || st.utime+st.stime == 0 {
		t.Errorf("the neighbour used no CPU in 300 ms (%+v, %v)", st, ok)
	}
	if nb.cmds[0].ProcessState == nil {
		t.Error("stop did not wait for the neighbour")
	}

	nb, err = startNeighbours(context.Background(), 1, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- nb.cmds[0].Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = nb.cmds[0].Process.Kill()
		t.Error("the time limit did not end the neighbour")
	}
	nb.cancel()
}

// TestNeighboursOwnSessions: each neighbour process leads a session of its
// own, not the harness's (with autogroup scheduling a shared session
// would split one share of CPU between the neighbours and walapply), and
// so does a process started as walapply is (sessionOfItsOwn).
func TestNeighboursOwnSessions(t *testing.T) {
	nb, err := startNeighbours(context.Background(), 2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer nb.stop()
	own, _ := unix.Getsid(0)
	for _, c := range nb.cmds {
		sid, err := unix.Getsid(c.Process.Pid)
		if err != nil || sid != c.Process.Pid || sid == own {
			t.Errorf("neighbour %d is in session %d (%v), want its own; the harness's is %d", c.Process.Pid, sid, err, own)
		}
	}
	cmd := exec.Command("/bin/sleep", "5")
	cmd.SysProcAttr = sessionOfItsOwn()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if sid, err := unix.Getsid(cmd.Process.Pid); err != nil || sid != cmd.Process.Pid {
		t.Errorf("a process started with sessionOfItsOwn is in session %d (%v), want its own", sid, err)
	}
}
