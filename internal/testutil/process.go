package testutil

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Process is a child process of a test (walapply, usually), waited for in
// the background so that the test can poll it, signal it and wait for it
// with a bound. It cannot outlive the test binary: it is SIGKILLed when
// the test process dies (Pdeathsig).
type Process struct {
	Cmd  *exec.Cmd
	done chan struct{}
	err  error // Cmd.Wait's result, once done is closed
}

// StartProcess starts cmd.
func StartProcess(cmd *exec.Cmd) (*Process, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{Cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p, nil
}

// Pid is the process's id.
func (p *Process) Pid() int { return p.Cmd.Process.Pid }

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error { return p.Cmd.Process.Signal(sig) }

// Done is closed once the process has exited and been waited for.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited and, if so, how (Cmd.Wait's
// error: nil for exit status 0).
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Wait waits up to timeout for the process to exit; exited is false if it
// still runs.
func (p *Process) Wait(timeout time.Duration) (exited bool, err error) {
	select {
	case <-p.done:
		return true, p.err
	case <-time.After(timeout):
		return false, nil
	}
}

// Kill SIGKILLs the process (if it still runs) and waits for it.
func (p *Process) Kill() {
	_ = p.Cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// ExitCode is the exit status err (a Wait result) stands for: 0 for nil,
// -1 for an error that is not an exit status.
func ExitCode(err error) int {
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.ExitCode()
	}
	return -1
}
