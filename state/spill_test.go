package state

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// rec is one spill record as the tests see it.
type rec struct {
	sub uint32
	msg string
}

func (r rec) String() string {
	if len(r.msg) > 20 {
		return fmt.Sprintf("%d:%q...(%d bytes)", r.sub, r.msg[:20], len(r.msg))
	}
	return fmt.Sprintf("%d:%q", r.sub, r.msg)
}

func openTestDir(t *testing.T, fsys FS, bufSize int) *SpillDir {
	t.Helper()
	d, removed, err := OpenSpillDir(fsys, filepath.Join(t.TempDir(), "spill"), "app1", "tgt1")
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 0 {
		t.Fatalf("a new directory had stale files: %v", removed)
	}
	d.BufferSize = bufSize
	return d
}

func readAll(t *testing.T, d *SpillDir, xid uint32) []rec {
	t.Helper()
	r, err := d.OpenReader(xid)
	if err != nil {
		t.Fatalf("OpenReader(%d): %v", xid, err)
	}
	defer r.Close()
	var got []rec
	for {
		sub, msg, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("Next after %d records: %v", len(got), err)
		}
		got = append(got, rec{sub, string(msg)})
	}
	if r.Records() != int64(len(got)) {
		t.Fatalf("reader Records() = %d, read %d", r.Records(), len(got))
	}
	return got
}

func appendAll(t *testing.T, f *SpillFile, recs ...rec) {
	t.Helper()
	for _, r := range recs {
		if err := f.Append(r.sub, []byte(r.msg)); err != nil {
			t.Fatalf("Append(%v): %v", r, err)
		}
	}
}

func sameRecs(t *testing.T, got, want []rec) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("records differ:\n got  %v\n want %v", got, want)
	}
}

// bufferSizes runs each writer test with a tiny buffer (every record is
// flushed or written directly) and the default one (nothing reaches the file
// before the reader flushes).
var bufferSizes = []int{32, defaultSpillBufferSize}

func TestSpillRoundTrip(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 20000) // 320000 bytes > any buffer
	want := []rec{
		{100, "B\x00\x00\x00"},
		{100, ""},
		{101, "I" + strings.Repeat("x", 50)},
		{100, big},
		{102, "U\xff\x00\xfe"},
		{100, big[:defaultSpillBufferSize-spillRecordHeader]}, // fills the buffer exactly
		{101, "C"},
	}
	for _, bs := range bufferSizes {
		t.Run(fmt.Sprintf("buffer%d", bs), func(t *testing.T) {
			d := openTestDir(t, OSFS, bs)
			f, err := d.Create(100)
			if err != nil {
				t.Fatal(err)
			}
			appendAll(t, f, want...)
			var size int64 = spillHeaderSize("app1")
			for _, r := range want {
				size += spillRecordHeader + int64(len(r.msg))
			}
			if f.Size() != size || f.Records() != int64(len(want)) {
				t.Fatalf("Size, Records = %d, %d; want %d, %d", f.Size(), f.Records(), size, len(want))
			}
			if st := d.Stats(); st != (SpillStats{Files: 1, Bytes: size, Records: int64(len(want))}) {
				t.Fatalf("Stats() = %+v", st)
			}
			sameRecs(t, readAll(t, d, 100), want)
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(f.Path())
			if err != nil {
				t.Fatal(err)
			}
			if fi.Size() != size {
				t.Fatalf("file is %d bytes, want %d", fi.Size(), size)
			}
			if err := d.Remove(100); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(f.Path()); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("file still there after Remove: %v", err)
			}
			if st := d.Stats(); st != (SpillStats{}) {
				t.Fatalf("Stats() after Remove = %+v", st)
			}
		})
	}
}

// TestSpillAbortSubxact follows worker.c: an abort truncates at the aborted
// subxact's first record and forgets every subxact that started after it.
func TestSpillAbortSubxact(t *testing.T) {
	const top = 500
	type op struct {
		append []rec
		abort  uint32 // 0: none
		close  bool   // close, and reopen before the next append
	}
	tests := []struct {
		name string
		ops  []op
		want []rec
	}{
		{
			name: "abort of a subxact without records is a no-op",
			ops:  []op{{append: []rec{{top, "a"}, {501, "b"}}}, {abort: 999}},
			want: []rec{{top, "a"}, {501, "b"}},
		},
		{
			name: "abort drops the subxact's records and all after them",
			ops: []op{
				{append: []rec{{top, "a"}, {501, "b1"}, {501, "b2"}, {top, "c"}, {502, "d"}}},
				{abort: 501},
			},
			want: []rec{{top, "a"}},
		},
		{
			name: "nested: abort of the inner subxact keeps the outer's earlier records",
			ops: []op{
				{append: []rec{{top, "t1"}, {501, "outer1"}, {501, "outer2"}, {502, "inner1"}, {502, "inner2"}}},
				{abort: 502},
				{append: []rec{{501, "outer3"}, {top, "t2"}}},
			},
			want: []rec{{top, "t1"}, {501, "outer1"}, {501, "outer2"}, {501, "outer3"}, {top, "t2"}},
		},
		{
			name: "nested: inner then outer aborted, as the source sends them",
			ops: []op{
				{append: []rec{{top, "t1"}, {501, "outer1"}, {502, "inner1"}, {501, "outer2"}}},
				{abort: 502},
				{abort: 501},
				{append: []rec{{top, "t2"}}},
			},
			want: []rec{{top, "t1"}, {top, "t2"}},
		},
		{
			name: "child written before its parent: the child's abort cuts the parent's later records",
			ops: []op{
				{append: []rec{{top, "t1"}, {502, "child"}, {501, "parent"}}},
				{abort: 502},
				{abort: 501}, // forgotten with 502: no-op
			},
			want: []rec{{top, "t1"}},
		},
		{
			name: "an aborted subxid that reappears starts a new entry",
			ops: []op{
				{append: []rec{{top, "t1"}, {501, "x"}}},
				{abort: 501},
				{append: []rec{{top, "t2"}, {501, "y"}, {503, "z"}}},
				{abort: 501},
			},
			want: []rec{{top, "t1"}, {top, "t2"}},
		},
		{
			name: "abort on a closed file, between stream blocks",
			ops: []op{
				{append: []rec{{top, "t1"}, {501, strings.Repeat("s", 300)}, {502, "i"}}, close: true},
				{abort: 502},
				{abort: 501},
				{append: []rec{{top, "t2"}}},
			},
			want: []rec{{top, "t1"}, {top, "t2"}},
		},
		{
			name: "top-level xid discards every record",
			ops: []op{
				{append: []rec{{top, "t1"}, {501, "s"}}},
				{abort: top},
				{append: []rec{{502, "after"}}},
			},
			want: []rec{{502, "after"}},
		},
	}
	for _, bs := range bufferSizes {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s/buffer%d", tt.name, bs), func(t *testing.T) {
				d := openTestDir(t, OSFS, bs)
				f, err := d.Create(top)
				if err != nil {
					t.Fatal(err)
				}
				for _, o := range tt.ops {
					if len(o.append) > 0 {
						if f, err = d.Open(top); err != nil {
							t.Fatal(err)
						}
						appendAll(t, f, o.append...)
					}
					if o.close {
						if err := f.Close(); err != nil {
							t.Fatal(err)
						}
					}
					if o.abort != 0 {
						if err := f.AbortSubxact(o.abort); err != nil {
							t.Fatalf("AbortSubxact(%d): %v", o.abort, err)
						}
					}
				}
				var size int64 = spillHeaderSize("app1")
				for _, r := range tt.want {
					size += spillRecordHeader + int64(len(r.msg))
				}
				if f.Size() != size || f.Records() != int64(len(tt.want)) {
					t.Fatalf("Size, Records = %d, %d; want %d, %d", f.Size(), f.Records(), size, len(tt.want))
				}
				sameRecs(t, readAll(t, d, top), tt.want)
			})
		}
	}
}

func TestSpillReopen(t *testing.T) {
	d := openTestDir(t, OSFS, 64)
	if _, err := d.Open(7); err == nil {
		t.Fatal("Open of a file never created succeeded")
	}
	f, err := d.Create(7)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Create(7); err == nil {
		t.Fatal("second Create of the same xid succeeded")
	}
	appendAll(t, f, rec{7, "first block"}, rec{8, "sub"})
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Append(7, []byte("x")); err == nil {
		t.Fatal("Append on a closed file succeeded")
	}
	g, err := d.Open(7)
	if err != nil {
		t.Fatal(err)
	}
	if g != f {
		t.Fatal("Open returned another SpillFile")
	}
	appendAll(t, g, rec{8, "second block"}, rec{7, "top"})
	// The subxact offsets survive the close: aborting 8 cuts at its first
	// record, written in the first block.
	if err := g.AbortSubxact(8); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	sameRecs(t, readAll(t, d, 7), []rec{{7, "first block"}})

	// A file changed behind the writer's back is not reopened.
	if err := os.WriteFile(d.Path(7), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Open(7); !errors.Is(err, ErrSpillCorrupt) {
		t.Fatalf("Open of a file of the wrong size: %v, want ErrSpillCorrupt", err)
	}
}
