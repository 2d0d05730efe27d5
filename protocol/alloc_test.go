package protocol_test

import (
	"testing"

	"github.com/walapply/walapply/protocol"
	pt "github.com/walapply/walapply/protocol/protocoltest"
)

// benchRow is a realistic 8-column row in text format: bigint, int, two
// texts, numeric, bool, timestamptz and a NULL.
var benchRow = []pt.Col{
	pt.Text("1234567"),
	pt.Text("42"),
	pt.Text("Alice Example"),
	pt.Text("alice@example.com"),
	pt.Text("1234.56"),
	pt.Text("t"),
	pt.Text("2024-05-01 12:00:00.123456+00"),
	pt.Null(),
}

// benchKey is the old-key image of benchRow: the key column, NULLs for the
// rest.
var benchKey = []pt.Col{pt.Text("1234567"), pt.Null(), pt.Null(), pt.Null(), pt.Null(), pt.Null(), pt.Null(), pt.Null()}

var (
	benchInsert = pt.Insert(16384, 0, benchRow...)
	benchUpdate = pt.UpdateOld(16384, 0, protocol.TupleOldKey, benchKey, benchRow)
	benchDelete = pt.Delete(16384, 0, protocol.TupleOldKey, benchKey...)
)

// TestDecodeDMLDoesNotAllocate checks the allocation-free path the applier
// relies on: once the Decoder's values have seen a row of this width,
// Insert, Update, Delete and Truncate decode without allocating, streamed
// or not.
func TestDecodeDMLDoesNotAllocate(t *testing.T) {
	d := newDecoder(t, 4, true)
	block := [][]byte{pt.StreamStart(741, true), pt.Insert(16384, 742, benchRow...), pt.StreamStop()}
	cases := []struct {
		name   string
		decode func() error
	}{
		{"insert", decodeFn(d.Decode, benchInsert)},
		{"update", decodeFn(d.Decode, benchUpdate)},
		{"update without old", decodeFn(d.Decode, pt.Update(16384, 0, benchRow...))},
		{"delete", decodeFn(d.Decode, benchDelete)},
		{"truncate", decodeFn(d.Decode, pt.Truncate(0, 0, 16384, 16390))},
		{"streamed insert", func() error {
			for _, src := range block {
				if _, err := d.Decode(src); err != nil {
					return err
				}
			}
			return nil
		}},
		{"spilled update", decodeFn(d.DecodeStreamedChange, pt.UpdateOld(16384, 742, protocol.TupleOld, benchRow, benchRow))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.decode(); err != nil { // warm up
				t.Fatal(err)
			}
			var err error
			allocs := testing.AllocsPerRun(100, func() {
				if e := tc.decode(); e != nil {
					err = e
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			if allocs != 0 {
				t.Errorf("%v allocations per decode, want 0", allocs)
			}
		})
	}
}

func decodeFn(decode func([]byte) (protocol.Message, error), src []byte) func() error {
	return func() error {
		_, err := decode(src)
		return err
	}
}

// TestTupleDataAliasesSource checks the lifetime contract in the package doc:
// values point into src and cannot be appended to over the next value.
func TestTupleDataAliasesSource(t *testing.T) {
	src := pt.Insert(16384, 0, pt.Text("ab"), pt.Text("cd"))
	var m protocol.Insert
	if err := m.Decode(src); err != nil {
		t.Fatal(err)
	}
	c0 := m.New.Columns[0].Data
	if cap(c0) != len(c0) {
		t.Errorf("column 0: cap %d > len %d: an append would overwrite column 1", cap(c0), len(c0))
	}
	src[13] = 'X' // column 0's first byte
	if string(c0) != "Xb" {
		t.Errorf("column 0 = %q after changing src: not an alias", c0)
	}
	_ = append(c0, 'Z')
	if string(m.New.Columns[1].Data) != "cd" {
		t.Errorf("append to column 0 changed column 1 to %q", m.New.Columns[1].Data)
	}
}

func benchmarkDecode(b *testing.B, src []byte) {
	d := newDecoder(b, 4, false)
	if _, err := d.Decode(src); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Decode(src); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeInsert decodes an 8-column Insert (benchRow).
func BenchmarkDecodeInsert(b *testing.B) { benchmarkDecode(b, benchInsert) }

// BenchmarkDecodeUpdate decodes an 8-column Update with an old key.
func BenchmarkDecodeUpdate(b *testing.B) { benchmarkDecode(b, benchUpdate) }

// BenchmarkDecodeDelete decodes an 8-column Delete by old key.
func BenchmarkDecodeDelete(b *testing.B) { benchmarkDecode(b, benchDelete) }
