// Package spillfs is the filesystem that state's spill files are written
// through (FS, with OSFS the real one), and FaultFS, which injects I/O faults
// for the tests of state and apply. It is internal: nothing outside walapply
// needs it.
package spillfs

import (
	"io"
	"os"
)

// File is an open spill file. *os.File implements it.
type File interface {
	io.Reader
	io.Writer
	io.Seeker
	io.Closer
	// Sync commits the file's contents to stable storage.
	Sync() error
	// Truncate changes the size of the file. It does not move the offset.
	Truncate(size int64) error
}

// FS is the filesystem that spill files live in: the few operations the
// spill code needs, so that tests can inject I/O faults (FaultFS).
type FS interface {
	// Create creates or truncates the named file, open for reading and
	// writing.
	Create(name string) (File, error)
	// CreateExclusive creates the named file, open for reading and writing;
	// it fails with an error matching fs.ErrExist if the file exists.
	CreateExclusive(name string) (File, error)
	// Open opens the named file for reading.
	Open(name string) (File, error)
	// OpenReadWrite opens an existing file for reading and writing without
	// truncating it.
	OpenReadWrite(name string) (File, error)
	// Remove removes the named file.
	Remove(name string) error
	// ReadDir returns the names of the entries of the named directory,
	// sorted.
	ReadDir(name string) ([]string, error)
	// MkdirAll creates the named directory and any missing parents.
	MkdirAll(name string, perm os.FileMode) error
}

// OSFS is the operating system's filesystem.
var OSFS FS = osFS{}

type osFS struct{}

// Spill files hold row data of the source: readable by the owner only.
const spillFilePerm = 0o600

func (osFS) Create(name string) (File, error) {
	return os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, spillFilePerm)
}

func (osFS) CreateExclusive(name string) (File, error) {
	return os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, spillFilePerm)
}

func (osFS) Open(name string) (File, error) {
	return os.Open(name)
}

func (osFS) OpenReadWrite(name string) (File, error) {
	return os.OpenFile(name, os.O_RDWR, 0)
}

func (osFS) Remove(name string) error {
	return os.Remove(name)
}

func (osFS) ReadDir(name string) ([]string, error) {
	entries, err := os.ReadDir(name)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, nil
}

func (osFS) MkdirAll(name string, perm os.FileMode) error {
	return os.MkdirAll(name, perm)
}
