//go:build linux

package apply_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// tortureApplier runs walapply as a child process for the torture test. Its
// output goes through a pipe, not straight into a file: the spill-disk
// fault lowers the process's file size limit (RLIMIT_FSIZE), which would
// otherwise hit its log too.
type tortureApplier struct {
	childProcess
	log *lineLog
}

// newTortureApplier prepares the process; its log is kept (and its path
// printed) if the test fails.
func newTortureApplier(t *testing.T, args ...string) *tortureApplier {
	t.Helper()
	dir, err := os.MkdirTemp("", "walapply-torture-")
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "walapply.log")
	l, err := newLineLog(logPath)
	if err != nil {
		t.Fatal(err)
	}
	p := &tortureApplier{childProcess: childProcess{t: t, args: append([]string{walapplyBinary(t)}, args...), out: l}, log: l}
	t.Cleanup(func() {
		p.kill()
		l.close()
		if t.Failed() {
			t.Logf("walapply log (last lines; all of it kept in %s):\n%s", logPath, l.tail())
			return
		}
		os.RemoveAll(dir)
	})
	return p
}

// exited returns why the process ended if it ended by itself (nil while
// it runs): walapply stops on its own only for a permanent error, which the
// torture test must never cause.
func (p *tortureApplier) exited() error {
	if p.proc == nil {
		return nil
	}
	exited, err := p.proc.Exited()
	if !exited {
		return nil
	}
	p.proc = nil
	if err == nil {
		err = fmt.Errorf("exit status 0")
	}
	return fmt.Errorf("walapply exited by itself: %w", err)
}

// limitFileSize sets the process's RLIMIT_FSIZE: a write that would make a
// file larger than limit bytes fails with EFBIG (the Go runtime ignores
// SIGXFSZ), as the disk under the spill directory would when full. It is
// the way to inject a disk error into another process's spill files,
// whatever the filesystem and even as root (for whom permissions are no
// obstacle). Only the spill files are written by the process: its log is a
// pipe. unlimited restores the limit.
func (p *tortureApplier) limitFileSize(limit uint64, unlimited bool) error {
	if p.proc == nil {
		return fmt.Errorf("no walapply process")
	}
	var old unix.Rlimit
	pid := p.proc.Pid()
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, nil, &old); err != nil {
		return fmt.Errorf("reading RLIMIT_FSIZE of %d: %w", pid, err)
	}
	lim := unix.Rlimit{Cur: limit, Max: old.Max}
	if unlimited {
		lim.Cur = old.Max
	}
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, &lim, nil); err != nil {
		return fmt.Errorf("setting RLIMIT_FSIZE of %d: %w", pid, err)
	}
	return nil
}

// lineLog writes the applier's output to a file and counts the lines that
// contain each watched fragment; it keeps the last lines for a failure
// report.
type lineLog struct {
	mu      sync.Mutex
	f       *os.File
	partial []byte
	watch   map[string]int
	last    []string
	// conflictXids counts the conflict lines per source xid.
	conflictXids map[uint32]int
}

// watched are the log fragments the torture test counts.
var watched = []string{
	"transient error; reconnecting",
	"file too large",        // EFBIG from the spill-disk fault
	"replicating",           // a session connected
	"removed spill files",   // a restart cleaned up a killed run's files
	`"level":"error"`,       // anything logged as an error
	"moved the origin back", // a failed PREPARE repaired
	"leftover prepared",     // a prepared transaction nothing will finish
	"the connection was lost after PREPARE TRANSACTION took effect",
	"replayed a streamed transaction", // a streamed transaction committed
	"no longer prepared there",        // a prepared transaction vanished from the target
	`"message":"conflict"`,            // a row missing or in the way on the target
}

func newLineLog(path string) (*lineLog, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &lineLog{f: f, watch: map[string]int{}, conflictXids: map[uint32]int{}}, nil
}

func (l *lineLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.f.Write(b); err != nil {
		return 0, err
	}
	l.partial = append(l.partial, b...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		line := string(l.partial[:i])
		l.partial = l.partial[i+1:]
		for _, w := range watched {
			if strings.Contains(line, w) {
				l.watch[w]++
			}
		}
		if strings.Contains(line, `"message":"conflict"`) {
			var c struct{ Xid uint32 }
			_ = json.Unmarshal([]byte(line), &c)
			l.conflictXids[c.Xid]++
		}
		if l.last = append(l.last, line); len(l.last) > 60 {
			l.last = l.last[1:]
		}
	}
	return len(b), nil
}

// count returns how many lines so far contained fragment (one of watched).
func (l *lineLog) count(fragment string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.watch[fragment]
}

// conflicts returns the conflict lines per source xid so far.
func (l *lineLog) conflicts() map[uint32]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.conflictXids)
}

func (l *lineLog) tail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.last, "\n")
}

func (l *lineLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	_ = l.f.Close()
}
