package engine

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/walapply/walapply/state"
)

// SpillError is a failure to write, read or remove the spill file of a
// streamed transaction. Nothing of the transaction has been applied or
// confirmed when it is returned, so the source sends the transaction again
// after a reconnect. I/O errors (a full disk, EIO) are retried that way, so
// the run resumes by itself once the cause is gone; a damaged file or a
// permission problem stops the run.
type SpillError struct {
	Xid  uint32 // the streamed transaction's top-level xid; 0 for the directory
	Path string // the spill file, or the directory
	Op   string // what was being done: writing, reading, ...
	Err  error
}

func newSpillError(xid uint32, path, op string, err error) error {
	se := &SpillError{Xid: xid, Path: path, Op: op, Err: err}
	if !se.retryable() {
		return &PermanentError{Err: se}
	}
	return se
}

func (e *SpillError) Error() string {
	var b strings.Builder
	if e.Xid == 0 { // the directory, at the start of a session
		fmt.Fprintf(&b, "%s spill directory %s: %v", e.Op, e.Path, e.Err)
	} else if strings.Contains(e.Err.Error(), e.Path) { // the state package's errors name the file
		fmt.Fprintf(&b, "streamed source transaction %d: %v; nothing of the transaction was applied or confirmed", e.Xid, e.Err)
	} else {
		fmt.Fprintf(&b, "%s spill file %s of streamed source transaction %d: %v; nothing of the transaction was applied or confirmed", e.Op, e.Path, e.Xid, e.Err)
	}
	switch {
	case errors.Is(e.Err, syscall.ENOSPC) || errors.Is(e.Err, syscall.EDQUOT):
		fmt.Fprintf(&b, " (the disk of %s is full: free space there or point --spill-dir at a larger disk; walapply reconnects and the source sends the transaction again)", e.dir())
	case errors.Is(e.Err, state.ErrSpillCorrupt) || errors.Is(e.Err, state.ErrSpillMismatch):
		b.WriteString(" (the file changed after walapply wrote it: check the disk and that no other process writes to --spill-dir, then restart; the file is removed and the source sends the transaction again)")
	case errors.Is(e.Err, fs.ErrPermission) || errors.Is(e.Err, syscall.EROFS):
		fmt.Fprintf(&b, " (make %s writable for walapply or choose another directory with --spill-dir, then restart)", e.dir())
	default:
		b.WriteString(" (walapply reconnects and the source sends the transaction again)")
	}
	return b.String()
}

func (e *SpillError) Unwrap() error { return e.Err }

// dir is the spill directory.
func (e *SpillError) dir() string {
	if e.Xid == 0 {
		return e.Path
	}
	return filepath.Dir(e.Path)
}

// retryable tells whether reconnecting (the source resends the transaction)
// may succeed: for I/O errors, not for damaged files or permissions.
func (e *SpillError) retryable() bool {
	return !errors.Is(e.Err, state.ErrSpillCorrupt) && !errors.Is(e.Err, state.ErrSpillMismatch) &&
		!errors.Is(e.Err, fs.ErrPermission) && !errors.Is(e.Err, syscall.EROFS)
}

// SafeToRetry makes IsTransient (through pgconn.SafeToRetry) retry a
// retryable spill error after reconnecting.
func (e *SpillError) SafeToRetry() bool { return e.retryable() }

// openSpillDirError classifies a failure to open the spill directory.
func openSpillDirError(dir string, err error) error {
	switch {
	case errors.Is(err, state.ErrSpillMismatch), errors.Is(err, state.ErrSpillDirOwner):
		return &PermanentError{Err: fmt.Errorf("%w: spill directory %s: %w", ErrConfig, dir, err)}
	}
	return newSpillError(0, dir, "opening", err)
}
