package state

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/walapply/walapply/internal/spillfs"
)

// fileSize returns the size of the file on disk.
func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestSpillWriteFaults injects write failures at every point of a sequence of
// appends and checks that the failing call reports the cause, leaves the file
// ending at a record boundary, and succeeds when retried after the fault is
// cleared, with every record read back exactly once.
func TestSpillWriteFaults(t *testing.T) {
	recs := []rec{
		{1, "small"},
		{2, strings.Repeat("m", 40)},
		{1, strings.Repeat("L", 300)}, // larger than the 128-byte buffer: direct write
		{3, "tail"},
		{2, strings.Repeat("n", 100)},
	}
	faults := []struct {
		name   string
		inject func(f *spillfs.FaultFS, budget int64)
		want   error
	}{
		{"ENOSPC after budget", func(f *spillfs.FaultFS, b int64) { f.LimitSpace(b) }, syscall.ENOSPC},
		{"write error", func(f *spillfs.FaultFS, _ int64) { f.FailWrites(syscall.EIO) }, syscall.EIO},
		{"short write with error", func(f *spillfs.FaultFS, b int64) { f.ShortWrite(int(b%7), syscall.EFBIG) }, syscall.EFBIG},
		{"short write without error", func(f *spillfs.FaultFS, b int64) { f.ShortWrite(int(b%7), nil) }, io.ErrShortWrite},
	}
	for _, fault := range faults {
		// Fail at each append in turn, with various amounts written first.
		for failAt := range recs {
			for _, budget := range []int64{0, 5, 13, 60} {
				t.Run(fmt.Sprintf("%s/append%d/budget%d", fault.name, failAt, budget), func(t *testing.T) {
					ffs := spillfs.NewFaultFS(OSFS)
					d := openTestDir(t, ffs, 128)
					f, err := d.Create(1)
					if err != nil {
						t.Fatal(err)
					}
					appendAll(t, f, recs[:failAt]...)
					fault.inject(ffs, budget)
					// Append the rest and flush; the first write that the
					// fault hits fails, and is retried once it is cleared.
					faulted := false
					for i := failAt; i <= len(recs); i++ {
						onDisk := fileSize(t, f.Path())
						call := func() error { return f.Flush() }
						if i < len(recs) {
							call = func() error { return f.Append(recs[i].sub, []byte(recs[i].msg)) }
						}
						recordsBefore := f.Records()
						err := call()
						if err == nil {
							continue
						}
						if faulted {
							t.Fatalf("second error after the fault was cleared: %v", err)
						}
						faulted = true
						if !errors.Is(err, fault.want) || !strings.Contains(err.Error(), f.Path()) {
							t.Fatalf("error %q: want it to wrap %v and name the file", err, fault.want)
						}
						if errors.Is(err, ErrSpillBroken) {
							t.Fatalf("a write fault broke the file: %v", err)
						}
						if f.Records() != recordsBefore {
							t.Fatalf("failed call changed Records from %d to %d", recordsBefore, f.Records())
						}
						if got := fileSize(t, f.Path()); got != onDisk {
							t.Fatalf("file is %d bytes after the failed write, want %d (its last complete record)", got, onDisk)
						}
						ffs.Clear()
						if err := call(); err != nil {
							t.Fatalf("retry after clearing the fault: %v", err)
						}
					}
					if !faulted {
						t.Fatal("the fault never hit")
					}
					if err := f.Close(); err != nil {
						t.Fatal(err)
					}
					sameRecs(t, readAll(t, d, 1), recs)
				})
			}
		}
	}
}

func TestSpillSyncFault(t *testing.T) {
	ffs := spillfs.NewFaultFS(OSFS)
	d := openTestDir(t, ffs, 0)
	f, err := d.Create(5)
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, f, rec{5, "before"})
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	ffs.FailSyncs(syscall.EIO)
	appendAll(t, f, rec{5, "lost?"})
	err = f.Sync()
	if !errors.Is(err, syscall.EIO) || !errors.Is(err, ErrSpillBroken) || !strings.Contains(err.Error(), f.Path()) {
		t.Fatalf("Sync: %v, want EIO and ErrSpillBroken naming the file", err)
	}
	if ok, failed := ffs.Syncs(); ok != 1 || failed != 1 {
		t.Fatalf("syncs ok/failed = %d/%d, want 1/1", ok, failed)
	}
	ffs.Clear()
	// After a failed fsync nothing about the file is trusted.
	if err := f.Append(5, []byte("x")); !errors.Is(err, ErrSpillBroken) {
		t.Fatalf("Append after a failed sync: %v, want ErrSpillBroken", err)
	}
	if err := f.AbortSubxact(5); !errors.Is(err, ErrSpillBroken) {
		t.Fatalf("AbortSubxact after a failed sync: %v, want ErrSpillBroken", err)
	}
	if _, err := d.OpenReader(5); !errors.Is(err, ErrSpillBroken) {
		t.Fatalf("OpenReader after a failed sync: %v, want ErrSpillBroken", err)
	}
	// The way out: remove it and spill the transaction again.
	if err := d.Remove(5); err != nil {
		t.Fatal(err)
	}
	g, err := d.Create(5)
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, g, rec{5, "before"}, rec{5, "again"})
	if err := g.Sync(); err != nil {
		t.Fatal(err)
	}
	sameRecs(t, readAll(t, d, 5), []rec{{5, "before"}, {5, "again"}})
}

// FuzzSpillReader feeds arbitrary bytes to the reader, with and without a
// valid header in front: it must return records or an error, never panic,
// and every error other than io.EOF must be ErrSpillCorrupt or
// ErrSpillMismatch.
func FuzzSpillReader(f *testing.F) {
	valid := appendSpillHeader(nil, "fz", 11)
	var h [spillRecordHeader]byte
	for _, m := range []string{"B", "Ihello", ""} {
		putRecordHeader(h[:], recordKindMessage, 11, []byte(m))
		valid = append(append(valid, h[:]...), m...)
	}
	f.Add(valid, false)
	f.Add(valid[:len(valid)-3], false)
	f.Add([]byte{0xff, 0xff, 0xff, 0x3f}, true)
	f.Add([]byte{}, true)
	f.Fuzz(func(t *testing.T, data []byte, withHeader bool) {
		if withHeader {
			data = append(appendSpillHeader(nil, "fz", 11), data...)
		}
		r, err := NewSpillReader(bytes.NewReader(data), "fuzz", "fz", 11)
		if err != nil {
			if !errors.Is(err, ErrSpillCorrupt) && !errors.Is(err, ErrSpillMismatch) {
				t.Fatalf("header error %v is neither corrupt nor mismatch", err)
			}
			return
		}
		var total int
		for {
			_, msg, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				if !errors.Is(err, ErrSpillCorrupt) {
					t.Fatalf("record error %v is not ErrSpillCorrupt", err)
				}
				break
			}
			total += spillRecordHeader + len(msg)
			if total > len(data) {
				t.Fatalf("read %d bytes of records from %d bytes", total, len(data))
			}
		}
	})
}

// BenchmarkSpill appends b.N messages of 200 bytes (a typical small-row
// Insert) and reads them back.
func BenchmarkSpill(b *testing.B) {
	d, _, err := OpenSpillDir(OSFS, b.TempDir(), "bench", "tgt1")
	if err != nil {
		b.Fatal(err)
	}
	msg := bytes.Repeat([]byte("I"), 200)
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	b.ResetTimer()
	f, err := d.Create(1)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		if err := f.Append(uint32(1+i%4), msg); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	r, err := d.OpenReader(1)
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for {
		_, _, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		n++
	}
	r.Close()
	if n != b.N {
		b.Fatalf("read %d records, wrote %d", n, b.N)
	}
}
