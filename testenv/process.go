package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"runtime"
	"strconv"
	"sync"
	"syscall"
)

// serverUser is the operating-system account the server runs as when the
// test process is root (PostgreSQL refuses to run as root).
type serverUser struct {
	name     string
	uid, gid int
}

// lookupServerUser returns the account to run PostgreSQL programs as: nil
// (ourselves) unless we are root, else `postgres` or, failing that, `nobody`.
var lookupServerUser = sync.OnceValues(func() (*serverUser, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.Atoi(u.Uid)
		gid, err2 := strconv.Atoi(u.Gid)
		if err1 != nil || err2 != nil {
			continue
		}
		return &serverUser{name: name, uid: uid, gid: gid}, nil
	}
	return nil, errors.New("testenv: running as root, but neither user postgres nor nobody exists to run the server as (PostgreSQL refuses to run as root)")
})

// credential returns the SysProcAttr credential that switches to u; nil u
// means no switch. Supplementary groups are dropped.
func (u *serverUser) credential() *syscall.Credential {
	if u == nil {
		return nil
	}
	return &syscall.Credential{Uid: uint32(u.uid), Gid: uint32(u.gid), Groups: []uint32{}}
}

// chown gives path to u; a no-op when u is nil.
func (u *serverUser) chown(path string) error {
	if u == nil {
		return nil
	}
	return os.Lchown(path, u.uid, u.gid)
}

// describe names the account for error messages.
func (u *serverUser) describe() string {
	if u == nil {
		return "the current user"
	}
	return "user " + u.name
}

// serverEnv is the whole environment of PostgreSQL programs: nothing of the
// test process's (PGDATA, PGPORT, locale settings…) leaks into the server.
func serverEnv() []string {
	return []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C", "LANG=C", "TZ=UTC"}
}

// spawnRequests feeds the spawner goroutine.
var (
	spawnOnce     sync.Once
	spawnRequests chan spawnRequest
)

type spawnRequest struct {
	cmd  *exec.Cmd
	done chan error
}

// startProcess starts cmd with a parent-death signal so that the server does
// not outlive the test process, whatever ends it (a panic on test timeout,
// SIGKILL). Linux sends that signal when the *thread* that forked the child
// exits, and Go may end a thread, so every child is forked from one goroutine
// locked to a thread that lives as long as the process.
func startProcess(cmd *exec.Cmd, deathSignal syscall.Signal) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = deathSignal
	spawnOnce.Do(func() {
		spawnRequests = make(chan spawnRequest)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread must not exit
			for req := range spawnRequests {
				req.done <- req.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	spawnRequests <- spawnRequest{cmd: cmd, done: done}
	return <-done
}

// runServerProgram runs a short-lived PostgreSQL program (initdb) as u in
// dir and returns its combined output with any error.
func runServerProgram(u *serverUser, dir, name string, args ...string) ([]byte, error) {
	var out bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = serverEnv()
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: u.credential(), Setpgid: true}
	if err := startProcess(cmd, syscall.SIGKILL); err != nil {
		return nil, fmt.Errorf("starting %s as %s (every directory on its path must be searchable by that user): %w", name, u.describe(), err)
	}
	err := cmd.Wait()
	return out.Bytes(), err
}

// processStartTime returns the start time of process pid in clock ticks since
// boot (field 22 of /proc/<pid>/stat) and whether it is a zombie. Together
// with the pid it identifies a process even after the pid is reused.
func processStartTime(pid int) (start uint64, zombie bool, err error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, false, fmt.Errorf("testenv: malformed /proc/%d/stat", pid)
	}
	fields := bytes.Fields(data[i+1:])
	if len(fields) < 20 {
		return 0, false, fmt.Errorf("testenv: malformed /proc/%d/stat", pid)
	}
	start, err = strconv.ParseUint(string(fields[19]), 10, 64)
	return start, string(fields[0]) == "Z", err
}

// self identifies this process for the names of its cluster directories.
var self = sync.OnceValue(func() processID {
	start, _, err := processStartTime(os.Getpid())
	if err != nil {
		start = 0 // no /proc: fall back to the pid alone
	}
	return processID{pid: os.Getpid(), start: start}
})

// processID identifies a process: its pid and, where /proc exists, its start
// time (0 if unknown).
type processID struct {
	pid   int
	start uint64
}

// alive reports whether the process still runs. Without a start time it
// relies on the pid alone, and when in doubt it says yes: a wrong "dead"
// would delete a live test's cluster.
func (p processID) alive() bool {
	start, zombie, err := processStartTime(p.pid)
	switch {
	case err == nil:
		return !zombie && (p.start == 0 || start == p.start)
	case errors.Is(err, fs.ErrNotExist):
		if _, statErr := os.Stat("/proc/self/stat"); statErr != nil {
			// No /proc at all: ask the kernel directly.
			err := syscall.Kill(p.pid, 0)
			return err == nil || errors.Is(err, syscall.EPERM)
		}
		return false
	default:
		return true
	}
}
