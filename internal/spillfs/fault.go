package spillfs

import (
	"os"
	"sync"
	"syscall"
)

// FaultFS wraps an FS and injects I/O faults into the files it opens, for
// tests of the code that writes spill files (here and in the packages that
// use them). Faults apply to every file opened through it, including files
// opened before the fault was set, until Clear.
//
// It is safe for concurrent use.
type FaultFS struct {
	FS

	mu         sync.Mutex
	writeErr   error // every write fails with it, writing nothing
	spaceLeft  int64 // bytes that may still be written; < 0 means no limit
	shortMax   int   // the next write writes at most shortMax bytes (>= 0 armed)
	shortErr   error // and returns this error (nil breaks io.Writer's contract on purpose)
	syncErr    error // every sync fails with it
	written    int64 // bytes written through it in total
	syncs      int   // successful syncs
	failedSync int   // failed syncs
}

// NewFaultFS returns a FaultFS over fs with no fault set.
func NewFaultFS(fs FS) *FaultFS {
	return &FaultFS{FS: fs, spaceLeft: -1, shortMax: -1}
}

// FailWrites makes every write fail with err without writing anything.
func (f *FaultFS) FailWrites(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writeErr = err
}

// LimitSpace lets n more bytes be written in total, as if the disk filled up
// then: a write that does not fit writes what does and fails with ENOSPC.
func (f *FaultFS) LimitSpace(n int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.spaceLeft = n
}

// ShortWrite makes the next write write at most n bytes and return err. A nil
// err imitates a File that breaks io.Writer's contract by reporting a short
// count without an error.
func (f *FaultFS) ShortWrite(n int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.shortMax, f.shortErr = n, err
}

// FailSyncs makes every sync fail with err.
func (f *FaultFS) FailSyncs(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.syncErr = err
}

// Clear removes every fault.
func (f *FaultFS) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writeErr, f.syncErr, f.shortErr = nil, nil, nil
	f.spaceLeft, f.shortMax = -1, -1
}

// Written returns the number of bytes written through the FaultFS.
func (f *FaultFS) Written() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.written
}

// Syncs returns the number of successful and of failed syncs.
func (f *FaultFS) Syncs() (ok, failed int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.syncs, f.failedSync
}

// Create implements FS.
func (f *FaultFS) Create(name string) (File, error) {
	return f.wrap(f.FS.Create(name))
}

// Open implements FS.
func (f *FaultFS) Open(name string) (File, error) {
	return f.wrap(f.FS.Open(name))
}

// OpenReadWrite implements FS.
func (f *FaultFS) OpenReadWrite(name string) (File, error) {
	return f.wrap(f.FS.OpenReadWrite(name))
}

func (f *FaultFS) wrap(file File, err error) (File, error) {
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f}, nil
}

type faultFile struct {
	File
	fs *FaultFS
}

// Write writes as much of p as the faults allow.
func (ff *faultFile) Write(p []byte) (int, error) {
	f := ff.fs
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.writeErr != nil {
		return 0, &os.PathError{Op: "write", Path: "faultfs", Err: f.writeErr}
	}
	allowed := len(p)
	var fault error
	if f.shortMax >= 0 && allowed > f.shortMax {
		allowed, fault = f.shortMax, f.shortErr
	}
	f.shortMax, f.shortErr = -1, nil
	if f.spaceLeft >= 0 && int64(allowed) > f.spaceLeft {
		allowed, fault = int(f.spaceLeft), &os.PathError{Op: "write", Path: "faultfs", Err: syscall.ENOSPC}
	}
	n, err := ff.File.Write(p[:allowed])
	f.written += int64(n)
	if f.spaceLeft >= 0 {
		f.spaceLeft -= int64(n)
	}
	if err != nil {
		return n, err
	}
	return n, fault
}

// Sync fails while a sync fault is set.
func (ff *faultFile) Sync() error {
	f := ff.fs
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.syncErr != nil {
		f.failedSync++
		return &os.PathError{Op: "sync", Path: "faultfs", Err: f.syncErr}
	}
	if err := ff.File.Sync(); err != nil {
		f.failedSync++
		return err
	}
	f.syncs++
	return nil
}
