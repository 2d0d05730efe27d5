package state

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// defaultSpillBufferSize is the write buffer of each open spill file and the
// read buffer of a SpillReader.
const defaultSpillBufferSize = 64 << 10

// SpillDir is the directory of one applier's spill files for one target,
// one file per streamed top-level transaction (xid). It must not be shared
// with another applier or target: it deletes the spill files it finds at
// open, and its owner file keeps others out (spill_owner.go).
//
// SpillDir and its files are used by one goroutine (the apply loop), except
// Stats, which may be called from any goroutine.
type SpillDir struct {
	fs      FS
	dir     string
	applier string
	target  string // the target database applier applies to (spill_owner.go)

	// BufferSize is the write buffer of each file created or opened after it
	// is set; defaultSpillBufferSize if <= 0.
	BufferSize int

	mu    sync.Mutex
	files map[uint32]*SpillFile // created in this run and not removed
}

// SpillStats is a snapshot of a SpillDir for metrics.
type SpillStats struct {
	Files   int   // spill files of this run not yet removed
	Bytes   int64 // their total size, buffered bytes included
	Records int64 // their total number of records
}

const (
	spillFilePrefix = "xid-"
	spillFileSuffix = ".spill"
)

// spillFileName returns the file name for a top-level xid.
func spillFileName(xid uint32) string {
	return spillFilePrefix + strconv.FormatUint(uint64(xid), 10) + spillFileSuffix
}

// isSpillFileName reports whether name has the form spillFileName gives.
func isSpillFileName(name string) bool {
	_, ok := SpillFileXid(name)
	return ok
}

// SpillFileXid returns the top-level xid whose spill file is named name
// (the base name of a file in a spill directory), and false if name is not
// a spill file's name. It reads the name only, not the file.
func SpillFileXid(name string) (xid uint32, ok bool) {
	digits, ok := strings.CutPrefix(name, spillFilePrefix)
	if !ok {
		return 0, false
	}
	digits, ok = strings.CutSuffix(digits, spillFileSuffix)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseUint(digits, 10, 32)
	return uint32(v), err == nil
}

// OpenSpillDir opens the spill directory dir of applier for target (one line
// that identifies the target database; apply uses its system identifier,
// oid and server address), creating it if missing, and removes the spill files an
// earlier run left in it: nothing streamed is confirmed to the source before
// its commit, so the source sends those transactions again. It returns the
// paths it removed.
//
// It removes files only from a directory its owner file shows to be
// applier's for target (spill_owner.go); a directory of another applier or
// target, or with spill files and no owner, makes it fail with
// ErrSpillDirOwner, touching nothing; a spill file whose intact header
// names another applier, with ErrSpillMismatch. Files of other names are left alone.
func OpenSpillDir(fsys FS, dir, applier, target string) (*SpillDir, []string, error) {
	if err := validSpillApplier(applier); err != nil {
		return nil, nil, err
	}
	if err := validSpillTarget(target); err != nil {
		return nil, nil, err
	}
	if err := fsys.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("state: creating spill directory %s: %w", dir, err)
	}
	d := &SpillDir{fs: fsys, dir: dir, applier: applier, target: target, files: make(map[uint32]*SpillFile)}
	if err := d.claim(); err != nil {
		return nil, nil, err
	}
	removed, err := d.removeStale()
	if err != nil {
		return nil, removed, err
	}
	return d, removed, nil
}

// removeStale removes the spill files of an earlier run.
func (d *SpillDir) removeStale() ([]string, error) {
	names, err := d.fs.ReadDir(d.dir)
	if err != nil {
		return nil, fmt.Errorf("state: listing spill directory %s: %w", d.dir, err)
	}
	var removed []string
	for _, name := range names {
		if !isSpillFileName(name) {
			continue
		}
		path := filepath.Join(d.dir, name)
		if owner, ok := d.headerApplier(path); ok && owner != d.applier {
			return removed, fmt.Errorf("%w: %s was written by applier %q, not %q: give each applier its own spill directory",
				ErrSpillMismatch, path, owner, d.applier)
		}
		if err := d.fs.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, fmt.Errorf("state: removing stale spill file %s: %w", path, err)
		}
		removed = append(removed, path)
	}
	return removed, nil
}

// headerApplier returns the applier named by the intact header of a file.
// ok is false when the header cannot be read or is damaged (a file cut short
// by a crash while being created, for example).
func (d *SpillDir) headerApplier(path string) (applier string, ok bool) {
	f, err := d.fs.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	h, err := readSpillHeader(f, path)
	if err != nil {
		return "", false
	}
	return h.applier, true
}

// Dir returns the directory.
func (d *SpillDir) Dir() string { return d.dir }

// Path returns the path of the spill file of a top-level xid.
func (d *SpillDir) Path(xid uint32) string {
	return filepath.Join(d.dir, spillFileName(xid))
}

func (d *SpillDir) bufferSize() int {
	if d.BufferSize <= 0 {
		return defaultSpillBufferSize
	}
	return d.BufferSize
}

// Create creates the spill file of a top-level xid, open for appending. It is
// an error if this run already has a file for xid (Remove it first).
func (d *SpillDir) Create(xid uint32) (*SpillFile, error) {
	if xid == 0 {
		return nil, errors.New("state: creating a spill file: xid 0 is not a valid transaction id")
	}
	d.mu.Lock()
	_, exists := d.files[xid]
	d.mu.Unlock()
	if exists {
		return nil, fmt.Errorf("state: creating spill file for xid %d: it already exists in this run", xid)
	}
	path := d.Path(xid)
	f, err := d.fs.Create(path)
	if err != nil {
		return nil, fmt.Errorf("state: creating spill file %s: %w", path, err)
	}
	s := &SpillFile{
		dir:     d,
		xid:     xid,
		path:    path,
		f:       f,
		buf:     make([]byte, 0, d.bufferSize()),
		subxIdx: make(map[uint32]int),
	}
	// The header is buffered like a record and reaches the file with the
	// first flush.
	s.buf = appendSpillHeader(s.buf, d.applier, xid)
	s.size.Store(int64(len(s.buf)))
	d.mu.Lock()
	d.files[xid] = s
	d.mu.Unlock()
	return s, nil
}

// Open reopens the spill file of a top-level xid for appending (a later
// Stream Start block of the same transaction), after Close. If it is still
// open, Open returns it as it is. Only files created in this run can be
// opened: the subtransaction offsets live in memory.
func (d *SpillDir) Open(xid uint32) (*SpillFile, error) {
	s, err := d.lookup(xid)
	if err != nil {
		return nil, err
	}
	if err := s.reopen(); err != nil {
		return nil, err
	}
	return s, nil
}

// lookup returns the file of this run for xid.
func (d *SpillDir) lookup(xid uint32) (*SpillFile, error) {
	d.mu.Lock()
	s, ok := d.files[xid]
	d.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("state: no spill file for xid %d in this run", xid)
	}
	return s, nil
}

// Has reports whether this run has a spill file for xid.
func (d *SpillDir) Has(xid uint32) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.files[xid]
	return ok
}

// OpenReader opens the spill file of xid for replay. A writer still open is
// flushed first, so the reader sees every record appended so far. The reader
// verifies the header, every record's checksum, and that the file ends
// exactly where the writer ended it.
func (d *SpillDir) OpenReader(xid uint32) (*SpillReader, error) {
	s, err := d.lookup(xid)
	if err != nil {
		return nil, err
	}
	if s.f != nil {
		if err := s.Flush(); err != nil {
			return nil, err
		}
	}
	if s.broken != nil {
		return nil, s.broken
	}
	f, err := d.fs.Open(s.path)
	if err != nil {
		return nil, fmt.Errorf("state: opening spill file %s for replay: %w", s.path, err)
	}
	r, err := newSpillReader(f, s.path, d.applier, xid, s.size.Load(), d.bufferSize())
	if err != nil {
		f.Close()
		return nil, err
	}
	r.closer = f
	return r, nil
}

// Remove removes the spill file of xid, open or not (Stream Abort of the
// top-level transaction, or the end of its replay). Removing a file this run
// does not know is not an error.
func (d *SpillDir) Remove(xid uint32) error {
	d.mu.Lock()
	s, ok := d.files[xid]
	d.mu.Unlock()
	if ok {
		return s.Remove()
	}
	if err := d.fs.Remove(d.Path(xid)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("state: removing spill file %s: %w", d.Path(xid), err)
	}
	return nil
}

// RemoveAll removes every spill file of this run, for a restart of the
// stream: the source sends the in-progress transactions again from their
// start. It returns the paths it removed.
func (d *SpillDir) RemoveAll() ([]string, error) {
	d.mu.Lock()
	files := make([]*SpillFile, 0, len(d.files))
	for _, s := range d.files {
		files = append(files, s)
	}
	d.mu.Unlock()
	var removed []string
	var errs []error
	for _, s := range files {
		if err := s.Remove(); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, s.path)
	}
	return removed, errors.Join(errs...)
}

// Stats returns the number, size and records of the spill files of this run.
func (d *SpillDir) Stats() SpillStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := SpillStats{Files: len(d.files)}
	for _, s := range d.files {
		st.Bytes += s.size.Load()
		st.Records += s.records.Load()
	}
	return st
}

// forget drops a file from the directory's map.
func (d *SpillDir) forget(xid uint32) {
	d.mu.Lock()
	delete(d.files, xid)
	d.mu.Unlock()
}
