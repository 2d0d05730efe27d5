package state

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
)

// writeTestFile writes a spill file with the given records and returns its
// path and the offsets at which each record starts.
func writeTestFile(t *testing.T, d *SpillDir, xid uint32, recs []rec) (string, []int64) {
	t.Helper()
	f, err := d.Create(xid)
	if err != nil {
		t.Fatal(err)
	}
	var offs []int64
	off := spillHeaderSize(d.applier)
	for _, r := range recs {
		offs = append(offs, off)
		off += spillRecordHeader + int64(len(r.msg))
	}
	appendAll(t, f, recs...)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return f.Path(), offs
}

func TestSpillCorruption(t *testing.T) {
	recs := []rec{{9, "alpha"}, {10, strings.Repeat("b", 1000)}, {9, "gamma"}}
	hdr := spillHeaderSize("app1")
	tests := []struct {
		name    string
		flipAt  func(offs []int64) int64 // byte to flip; -1 for none
		cutTo   func(offs []int64, size int64) int64
		wantOff int64 // offset named in the error; -1: not checked
		wantRec int   // records readable before the error
	}{
		{name: "header byte", flipAt: func([]int64) int64 { return 12 }, wantOff: 0, wantRec: 0},
		{name: "applier name byte", flipAt: func([]int64) int64 { return hdr - 5 }, wantOff: 0, wantRec: 0},
		{name: "record crc", flipAt: func(o []int64) int64 { return o[1] }, wantRec: 1},
		{name: "record length", flipAt: func(o []int64) int64 { return o[1] + 4 }, wantRec: 1},
		{name: "record kind", flipAt: func(o []int64) int64 { return o[1] + 8 }, wantRec: 1},
		{name: "record subxid", flipAt: func(o []int64) int64 { return o[2] + 10 }, wantRec: 2},
		{name: "payload byte", flipAt: func(o []int64) int64 { return o[1] + spillRecordHeader + 500 }, wantRec: 1},
		{name: "tail cut inside a payload", cutTo: func(_ []int64, size int64) int64 { return size - 2 }, wantRec: 2},
		{name: "tail cut inside a record header", cutTo: func(o []int64, _ int64) int64 { return o[2] + 5 }, wantRec: 2},
		{name: "tail cut at a record boundary", cutTo: func(o []int64, _ int64) int64 { return o[2] }, wantRec: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := openTestDir(t, OSFS, 0)
			path, offs := writeTestFile(t, d, 42, recs)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			wantOff := int64(-1)
			if tt.flipAt != nil {
				at := tt.flipAt(offs)
				data[at] ^= 0x40
				if at >= hdr {
					wantOff = offs[tt.wantRec]
				} else {
					wantOff = 0
				}
			}
			if tt.cutTo != nil {
				data = data[:tt.cutTo(offs, int64(len(data)))]
				if tt.wantRec < len(offs) && int64(len(data)) > offs[tt.wantRec] {
					wantOff = offs[tt.wantRec]
				}
			}
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			r, err := d.OpenReader(42)
			n := 0
			for err == nil {
				_, _, err = r.Next()
				if err == nil {
					n++
				}
			}
			if r != nil {
				r.Close()
			}
			if !errors.Is(err, ErrSpillCorrupt) {
				t.Fatalf("after %d records: %v, want ErrSpillCorrupt", n, err)
			}
			if n != tt.wantRec {
				t.Fatalf("read %d records before the error, want %d", n, tt.wantRec)
			}
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q does not name the file", err)
			}
			if wantOff >= 0 && !strings.Contains(err.Error(), fmt.Sprintf("offset %d", wantOff)) {
				t.Fatalf("error %q does not name offset %d", err, wantOff)
			}
			// A sticky error: the reader does not go on past it.
			if r != nil {
				if _, _, again := r.Next(); !errors.Is(again, ErrSpillCorrupt) {
					t.Fatalf("Next after the error: %v", again)
				}
			}
		})
	}
}

// A file cut at a record boundary reads as complete without the size the
// writer left; OpenReader knows that size (tested above).
func TestSpillReaderCleanEOFWithoutSize(t *testing.T) {
	var b []byte
	b = appendSpillHeader(b, "app1", 3)
	var h [spillRecordHeader]byte
	putRecordHeader(h[:], recordKindMessage, 3, []byte("m"))
	b = append(append(b, h[:]...), 'm')
	r, err := NewSpillReader(bytes.NewReader(b), "mem", "app1", 3)
	if err != nil {
		t.Fatal(err)
	}
	if sub, msg, err := r.Next(); err != nil || sub != 3 || string(msg) != "m" {
		t.Fatalf("Next() = %d, %q, %v", sub, msg, err)
	}
	if _, _, err := r.Next(); err != io.EOF {
		t.Fatalf("Next at the end = %v, want io.EOF", err)
	}
}

func TestSpillHeaderMismatch(t *testing.T) {
	good := appendSpillHeader(nil, "app1", 77)
	otherVersion := slices.Clone(good)
	otherVersion[8] = 2
	tests := []struct {
		name    string
		data    []byte
		applier string
		xid     uint32
		want    error
	}{
		{"matches", good, "app1", 77, nil},
		{"another applier", good, "app2", 77, ErrSpillMismatch},
		{"another xid", good, "app1", 78, ErrSpillMismatch},
		{"another format version", otherVersion, "app1", 77, ErrSpillMismatch},
		{"bad magic", append([]byte("NOTSPILL"), good[8:]...), "app1", 77, ErrSpillCorrupt},
		{"short header", good[:10], "app1", 77, ErrSpillCorrupt},
		{"empty file", nil, "app1", 77, ErrSpillCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := NewSpillReader(bytes.NewReader(tt.data), "mem", tt.applier, tt.xid)
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if _, _, err := r.Next(); err != io.EOF {
					t.Fatalf("Next on a file without records = %v, want io.EOF", err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("NewSpillReader: %v, want %v", err, tt.want)
			}
		})
	}
}
