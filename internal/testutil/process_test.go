package testutil

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestProcess(t *testing.T) {
	p, err := StartProcess(exec.Command("sh", "-c", "exit 3"))
	if err != nil {
		t.Fatal(err)
	}
	if exited, err := p.Wait(time.Minute); !exited || ExitCode(err) != 3 {
		t.Fatalf("Wait = %v, %v; want exit status 3", exited, err)
	}
	if exited, err := p.Exited(); !exited || ExitCode(err) != 3 {
		t.Errorf("Exited after Wait = %v, %v", exited, err)
	}

	p, err = StartProcess(exec.Command("sleep", "60"))
	if err != nil {
		t.Fatal(err)
	}
	if exited, _ := p.Exited(); exited {
		t.Fatal("sleep 60 exited at once")
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if exited, err := p.Wait(time.Minute); !exited || ExitCode(err) != -1 {
		t.Errorf("after SIGTERM: Wait = %v, %v; want killed by a signal", exited, err)
	}
	p.Kill() // exited already: returns at once
}
