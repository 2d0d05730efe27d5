package apply_test

import (
	"io"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// childProcess is walapply run as a child process of a test, so that it
// can be SIGKILLed like a crashed applier or stopped with SIGTERM like an
// operator would.
type childProcess struct {
	t    *testing.T
	args []string  // the binary, then its arguments
	out  io.Writer // stdout and stderr
	cmd  *exec.Cmd // nil when not running
	done chan error
	runs int // processes started
}

func (p *childProcess) start() {
	p.t.Helper()
	p.cmd = exec.Command(p.args[0], p.args[1:]...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	// The applier must not outlive the test binary.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	p.runs++
	done := make(chan error, 1)
	p.done = done
	go func() { done <- p.cmd.Wait() }()
}

// kill SIGKILLs the process and waits for it.
func (p *childProcess) kill() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	p.cmd = nil
}

// stop sends SIGTERM and checks for a clean exit (status 0) within a
// minute.
func (p *childProcess) stop() {
	p.t.Helper()
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.cmd = nil
		if err != nil {
			p.t.Errorf("walapply did not exit cleanly on SIGTERM: %v", err)
		}
	case <-time.After(time.Minute):
		p.t.Error("walapply did not stop within a minute of SIGTERM")
		p.kill()
	}
}
