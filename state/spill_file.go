package state

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync/atomic"
)

// SpillFile is the spill file of one streamed top-level transaction, open for
// appending records (see the package documentation for the format).
//
// Writes are buffered (SpillDir.BufferSize). A write that fails (ENOSPC, a
// short write) is undone: the file is truncated back to its last complete
// record and the records not yet written stay buffered, so the failing call
// can be retried once the cause is gone. A failed Sync is not retryable:
// after a failed fsync the kernel may have dropped the dirty pages, so the
// file is marked broken (ErrSpillBroken) and must be removed.
type SpillFile struct {
	dir  *SpillDir
	xid  uint32
	path string

	f       File   // nil while closed
	buf     []byte // records not yet written; cap is the buffer size
	written int64  // bytes in the file: the offset after its last complete record
	broken  error  // set once the file cannot be trusted

	// Subtransactions in the order their first record was appended, with the
	// offset of that record and the record count before it.
	subxacts []subxact
	subxIdx  map[uint32]int // subxid -> index in subxacts
	lastSub  uint32         // subxid of the previous record, 0 if none

	size    atomic.Int64 // written + len(buf), read by SpillDir.Stats
	records atomic.Int64
}

type subxact struct {
	xid     uint32
	offset  int64
	records int64
}

// Xid returns the top-level xid of the file.
func (s *SpillFile) Xid() uint32 { return s.xid }

// Path returns the file's path.
func (s *SpillFile) Path() string { return s.path }

// Size returns the size of the file in bytes, buffered bytes included.
func (s *SpillFile) Size() int64 { return s.size.Load() }

// Records returns the number of records in the file, buffered ones included.
func (s *SpillFile) Records() int64 { return s.records.Load() }

// usable returns why the file cannot be appended to, or nil.
func (s *SpillFile) usable() error {
	if s.broken != nil {
		return s.broken
	}
	if s.f == nil {
		return fmt.Errorf("state: spill file %s is closed", s.path)
	}
	return nil
}

// Append appends a pgoutput message of subtransaction subxid (the top-level
// xid itself for changes outside any subtransaction). msg is copied or
// written before Append returns. On error nothing was appended and the file
// is as before the call.
func (s *SpillFile) Append(subxid uint32, msg []byte) error {
	if err := s.usable(); err != nil {
		return err
	}
	if subxid == 0 {
		return fmt.Errorf("state: appending to spill file %s: subxid 0 is not a valid transaction id", s.path)
	}
	if len(msg) > maxSpillRecord {
		return fmt.Errorf("state: appending to spill file %s: message of %d bytes exceeds %d", s.path, len(msg), maxSpillRecord)
	}
	recLen := spillRecordHeader + len(msg)
	if len(s.buf) > 0 && len(s.buf)+recLen > cap(s.buf) {
		if err := s.Flush(); err != nil {
			return err
		}
	}
	offset := s.written + int64(len(s.buf))
	if recLen <= cap(s.buf) {
		n := len(s.buf)
		s.buf = s.buf[:n+recLen]
		copy(s.buf[n+spillRecordHeader:], msg)
		putRecordHeader(s.buf[n:n+spillRecordHeader], recordKindMessage, subxid, s.buf[n+spillRecordHeader:])
	} else {
		// A record larger than the buffer goes straight to the file (the
		// buffer is empty here), without copying it.
		var hdr [spillRecordHeader]byte
		putRecordHeader(hdr[:], recordKindMessage, subxid, msg)
		if err := s.write(hdr[:], msg); err != nil {
			return err
		}
	}
	s.noteSubxact(subxid, offset)
	s.records.Add(1)
	s.size.Store(s.written + int64(len(s.buf)))
	return nil
}

// noteSubxact remembers the offset of the first record of a subtransaction,
// as worker.c's subxact_info_add does. Changes of the top-level transaction
// itself need no entry: only its abort as a whole discards them.
func (s *SpillFile) noteSubxact(subxid uint32, offset int64) {
	if subxid == s.xid || subxid == s.lastSub {
		return
	}
	s.lastSub = subxid
	if _, ok := s.subxIdx[subxid]; ok {
		return
	}
	s.subxIdx[subxid] = len(s.subxacts)
	s.subxacts = append(s.subxacts, subxact{xid: subxid, offset: offset, records: s.records.Load()})
}

// AbortSubxact discards the records of subtransaction subxid: the file is
// truncated at that subtransaction's first record, which drops it and every
// record after it (those belong to it, to its own subtransactions, or to
// subtransactions started after it). A subxid without records is a no-op; the
// top-level xid discards every record. It works on a closed file too (Stream
// Abort arrives outside Stream Start … Stream Stop).
func (s *SpillFile) AbortSubxact(subxid uint32) error {
	if s.broken != nil {
		return s.broken
	}
	var offset, records int64
	if subxid == s.xid {
		offset, records = spillHeaderSize(s.dir.applier), 0
		s.subxacts, s.subxIdx = s.subxacts[:0], make(map[uint32]int)
	} else {
		i, ok := s.subxIdx[subxid]
		if !ok {
			return nil
		}
		offset, records = s.subxacts[i].offset, s.subxacts[i].records
		for _, sx := range s.subxacts[i:] {
			delete(s.subxIdx, sx.xid)
		}
		s.subxacts = s.subxacts[:i]
	}
	s.lastSub = 0
	if err := s.truncate(offset); err != nil {
		return fmt.Errorf("state: discarding subtransaction %d of xid %d: %w", subxid, s.xid, err)
	}
	s.records.Store(records)
	s.size.Store(s.written + int64(len(s.buf)))
	return nil
}

// truncate cuts the file's logical content at offset.
func (s *SpillFile) truncate(offset int64) error {
	if offset >= s.written {
		s.buf = s.buf[:offset-s.written]
		return nil
	}
	s.buf = s.buf[:0]
	f := s.f
	if f == nil {
		var err error
		if f, err = s.dir.fs.OpenReadWrite(s.path); err != nil {
			return fmt.Errorf("opening spill file %s: %w", s.path, err)
		}
		defer f.Close()
	}
	if err := f.Truncate(offset); err != nil {
		// The records before offset are intact, but the ones meant to be
		// discarded may still be in the file.
		s.broken = fmt.Errorf("%w: truncating %s to %d: %w", ErrSpillBroken, s.path, offset, err)
		return s.broken
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		s.broken = fmt.Errorf("%w: seeking %s to %d: %w", ErrSpillBroken, s.path, offset, err)
		return s.broken
	}
	s.written = offset
	return nil
}

// write writes parts after the last complete record, or undoes what it
// wrote.
func (s *SpillFile) write(parts ...[]byte) error {
	var n int64
	for _, p := range parts {
		m, err := s.f.Write(p)
		n += int64(m)
		if err == nil && m < len(p) {
			err = io.ErrShortWrite
		}
		if err != nil {
			werr := fmt.Errorf("state: writing spill file %s at offset %d: %w", s.path, s.written, err)
			s.undo(werr)
			if s.broken != nil {
				return s.broken
			}
			return werr
		}
	}
	s.written += n
	return nil
}

// undo removes a partial write, so that the file again ends after its last
// complete record and a retry appends at the right place.
func (s *SpillFile) undo(cause error) {
	if err := s.f.Truncate(s.written); err != nil {
		s.broken = fmt.Errorf("%w: %w; truncating back to %d: %w", ErrSpillBroken, cause, s.written, err)
		return
	}
	if _, err := s.f.Seek(s.written, io.SeekStart); err != nil {
		s.broken = fmt.Errorf("%w: %w; seeking back to %d: %w", ErrSpillBroken, cause, s.written, err)
	}
}

// Flush writes the buffered records to the file (not necessarily to stable
// storage). On error they stay buffered and Flush can be retried.
func (s *SpillFile) Flush() error {
	if err := s.usable(); err != nil {
		return err
	}
	if len(s.buf) == 0 {
		return nil
	}
	if err := s.write(s.buf); err != nil {
		return err
	}
	s.buf = s.buf[:0]
	return nil
}

// Sync flushes and then syncs the file to stable storage. Correctness does
// not need it (spill files are not read after a restart); it exists for
// operators who want spilled data out of the page cache. A failed sync marks
// the file broken.
func (s *SpillFile) Sync() error {
	if err := s.Flush(); err != nil {
		return err
	}
	if err := s.f.Sync(); err != nil {
		s.broken = fmt.Errorf("%w: syncing %s: %w", ErrSpillBroken, s.path, err)
		return s.broken
	}
	return nil
}

// Close flushes and closes the file, keeping it and its subtransaction
// offsets for a later SpillDir.Open or OpenReader. If the flush fails, the
// file stays open so that Close can be retried (or the file removed).
func (s *SpillFile) Close() error {
	if s.f == nil {
		return nil
	}
	if s.broken == nil {
		if err := s.Flush(); err != nil {
			return err
		}
	}
	err := s.f.Close()
	s.f = nil
	if err != nil && s.broken == nil {
		s.broken = fmt.Errorf("%w: closing %s: %w", ErrSpillBroken, s.path, err)
		return s.broken
	}
	return nil
}

// reopen opens a closed file again for appending.
func (s *SpillFile) reopen() error {
	if s.broken != nil {
		return s.broken
	}
	if s.f != nil {
		return nil
	}
	f, err := s.dir.fs.OpenReadWrite(s.path)
	if err != nil {
		return fmt.Errorf("state: reopening spill file %s: %w", s.path, err)
	}
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		f.Close()
		return fmt.Errorf("state: reopening spill file %s: %w", s.path, err)
	}
	if end != s.written {
		f.Close()
		return fmt.Errorf("%w: %s is %d bytes long, %d were written", ErrSpillCorrupt, s.path, end, s.written)
	}
	s.f = f
	return nil
}

// Remove closes the file without flushing and deletes it. The buffered and
// written records are discarded.
func (s *SpillFile) Remove() error {
	var errs []error
	if s.f != nil {
		if err := s.f.Close(); err != nil {
			errs = append(errs, err)
		}
		s.f = nil
	}
	s.buf = s.buf[:0]
	s.dir.forget(s.xid)
	if err := s.dir.fs.Remove(s.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("state: removing spill file %s: %w", s.path, err)
	}
	return nil
}
