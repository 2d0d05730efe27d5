package engine

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/walapply/walapply/apply/internal/compact"
)

// The binary text[] of two elements, "ab" and NULL, byte by byte.
func TestPackArraysGolden(t *testing.T) {
	a := &Applier{}
	a.params = [][]byte{[]byte("ab"), nil}
	a.packArrays(1, nil)
	want := []byte{
		0, 0, 0, 1, // dimensions
		0, 0, 0, 1, // has nulls
		0, 0, 0, 25, // element type text
		0, 0, 0, 2, // elements
		0, 0, 0, 1, // lower bound
		0, 0, 0, 2, 'a', 'b',
		0xff, 0xff, 0xff, 0xff, // NULL
	}
	if len(a.params) != 1 || !bytes.Equal(a.params[0], want) || a.formats[0] != 1 {
		t.Fatalf("packArrays = %v (format %v), want %v", a.params, a.formats, want)
	}
	if got := compact.AppendArrayHeader(nil, compact.TextOID, 0, 0); !bytes.Equal(got, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 25}) {
		t.Errorf("empty array header = %v", got)
	}
	// A binary int4 column next to a text one: its array says int4.
	a.params = [][]byte{{0, 0, 0, 7}, []byte("x")}
	a.packArrays(2, []uint32{23})
	wantInt := []byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 23, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 7}
	wantText := []byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 25, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 'x'}
	if len(a.params) != 2 || !bytes.Equal(a.params[0], wantInt) || !bytes.Equal(a.params[1], wantText) {
		t.Errorf("typed and text arrays = %v, want %v and %v", a.params, wantInt, wantText)
	}
}

// decodeTextArray reads a one-dimensional binary text[] back, nil for NULL.
func decodeTextArray(t *testing.T, b []byte) [][]byte {
	t.Helper()
	u32 := func() uint32 {
		if len(b) < 4 {
			t.Fatalf("array truncated")
		}
		v := binary.BigEndian.Uint32(b)
		b = b[4:]
		return v
	}
	if dims := u32(); dims != 1 {
		t.Fatalf("%d dimensions", dims)
	}
	nulls, elem, n, lb := u32(), u32(), u32(), u32()
	if elem != compact.TextOID || lb != 1 {
		t.Fatalf("element type %d, lower bound %d", elem, lb)
	}
	var out [][]byte
	sawNull := false
	for i := uint32(0); i < n; i++ {
		l := u32()
		if l == 0xFFFFFFFF {
			out, sawNull = append(out, nil), true
			continue
		}
		if int(l) > len(b) {
			t.Fatalf("element %d truncated", i)
		}
		out, b = append(out, b[:l:l]), b[l:]
	}
	if len(b) != 0 || (nulls == 1) != sawNull {
		t.Fatalf("%d bytes left, has-nulls flag %d, nulls seen %v", len(b), nulls, sawNull)
	}
	return out
}

func TestPackArrays(t *testing.T) {
	a := &Applier{}
	// two rows of three values, row by row
	a.params = [][]byte{[]byte("1"), nil, []byte(`x"`), []byte("2"), []byte(""), []byte("{\\}, NULL")}
	a.formats = []int16{0, 0, 0, 0, 0, 0}
	a.packArrays(3, nil)
	want := [][][]byte{{[]byte("1"), []byte("2")}, {nil, {}}, {[]byte(`x"`), []byte("{\\}, NULL")}}
	if len(a.params) != len(want) || len(a.formats) != len(want) {
		t.Fatalf("packArrays: %d params, %d formats, want %d", len(a.params), len(a.formats), len(want))
	}
	for i, w := range want {
		got := decodeTextArray(t, a.params[i])
		if a.formats[i] != 1 || len(got) != len(w) {
			t.Fatalf("column %d: %q (format %d), want %q", i, got, a.formats[i], w)
		}
		for j := range w {
			if (got[j] == nil) != (w[j] == nil) || !bytes.Equal(got[j], w[j]) {
				t.Errorf("column %d row %d: %q, want %q", i, j, got[j], w[j])
			}
		}
	}
}

// BenchmarkPackArrays packs a pgbench-like run (2,000 rows of four values,
// one of them 84 characters) into binary text[] parameters.
func BenchmarkPackArrays(b *testing.B) {
	a := &Applier{}
	filler := []byte(strings.Repeat(" ", 84))
	rows := make([][]byte, 0, 2000*4)
	for i := 0; i < 2000; i++ {
		rows = append(rows, []byte("123456"), []byte("7"), []byte("-4321"), filler)
	}
	b.ReportAllocs()
	b.SetBytes(int64(2000 * (6 + 1 + 5 + 84)))
	for i := 0; i < b.N; i++ {
		a.params = append(a.params[:0], rows...)
		a.formats = a.formats[:0]
		a.packArrays(4, nil)
	}
}
