package apply_test

import (
	"io"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/walapply/walapply/internal/testutil"
)

// childProcess is walapply run as a child process of a test, so that it
// can be SIGKILLed like a crashed applier or stopped with SIGTERM like an
// operator would, and started again with the same arguments.
type childProcess struct {
	t    *testing.T
	args []string          // the binary, then its arguments
	out  io.Writer         // stdout and stderr
	proc *testutil.Process // nil when not running
	runs int               // processes started
}

func (p *childProcess) start() {
	p.t.Helper()
	cmd := exec.Command(p.args[0], p.args[1:]...)
	cmd.Stdout, cmd.Stderr = p.out, p.out
	proc, err := testutil.StartProcess(cmd)
	if err != nil {
		p.t.Fatal(err)
	}
	p.proc = proc
	p.runs++
}

// kill SIGKILLs the process and waits for it.
func (p *childProcess) kill() {
	if p.proc == nil {
		return
	}
	p.proc.Kill()
	p.proc = nil
}

// wait waits up to timeout for the process to exit by itself (after a
// signal, say) and says how it did; exited is false if it still runs.
func (p *childProcess) wait(timeout time.Duration) (exited bool, err error) {
	if p.proc == nil {
		return true, nil
	}
	exited, err = p.proc.Wait(timeout)
	if exited {
		p.proc = nil
	}
	return exited, err
}

// stop sends SIGTERM and checks for a clean exit (status 0) within a
// minute.
func (p *childProcess) stop() {
	p.t.Helper()
	if p.proc == nil {
		return
	}
	_ = p.proc.Signal(syscall.SIGTERM)
	exited, err := p.wait(time.Minute)
	switch {
	case !exited:
		p.t.Error("walapply did not stop within a minute of SIGTERM")
		p.kill()
	case err != nil:
		p.t.Errorf("walapply did not exit cleanly on SIGTERM: %v", err)
	}
}
