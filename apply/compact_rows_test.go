package apply

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/walapply/walapply/protocol"
)

// The binary text[] of two elements, "ab" and NULL, byte by byte.
func TestPackArraysGolden(t *testing.T) {
	a := &applier{}
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
	if got := appendArrayHeader(nil, textOID, 0, 0); !bytes.Equal(got, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 25}) {
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
	if elem != textOID || lb != 1 {
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
	a := &applier{}
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

func TestWriteRowSource(t *testing.T) {
	var b strings.Builder
	writeRowSource(&b, false, 2, []string{"integer", "text"}, nil)
	if got, want := b.String(), "VALUES ($1, $2), ($3, $4)"; got != want {
		t.Errorf("VALUES form:\n got %s\nwant %s", got, want)
	}
	b.Reset()
	writeRowSource(&b, true, 500, []string{"integer", `"Other"."Mood"`}, nil)
	want := `SELECT _a.c1::integer AS column1, _a.c2::"Other"."Mood" AS column2 FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[]), pg_catalog.unnest($2::pg_catalog.text[])) AS _a(c1, c2)`
	if got := b.String(); got != want {
		t.Errorf("array form:\n got %s\nwant %s", got, want)
	}
	b.Reset()
	writeRowSource(&b, true, 500, []string{"integer", "pg_catalog.text"}, []uint32{1007, 0})
	want = `SELECT _a.c1 AS column1, _a.c2::pg_catalog.text AS column2 FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2::pg_catalog.text[])) AS _a(c1, c2)`
	if got := b.String(); got != want {
		t.Errorf("array form with a binary column:\n got %s\nwant %s", got, want)
	}
	if got := rowParamOIDs(true, 500, []uint32{23, 25}, nil); len(got) != 2 || got[0] != textArrayOID || got[1] != textArrayOID {
		t.Errorf("array form parameter types %v", got)
	}
	if got := rowParamOIDs(true, 500, []uint32{23, 25}, []uint32{1007}); len(got) != 2 || got[0] != 1007 || got[1] != textArrayOID {
		t.Errorf("array form parameter types with a binary column %v", got)
	}
	if got, want := shapeName("I", true, 500, []uint32{1007, 0}), "aI-bt"; got != want {
		t.Errorf("shape %s, want %s", got, want)
	}
	if got := rowParamOIDs(false, 2, []uint32{23, 25}, nil); len(got) != 4 || got[2] != 23 || got[3] != 25 {
		t.Errorf("VALUES form parameter types %v", got)
	}
}

// An empty value read first must stay an empty value, not NULL.
func TestCompactorKeepsFirstEmptyValue(t *testing.T) {
	c := newCompactor()
	x := c.Put(&protocol.TupleColumn{Kind: protocol.ColumnText, Data: []byte{}})
	if b := c.Bytes(x); b == nil || len(b) != 0 {
		t.Fatalf("bytes of an empty text value = %#v, want a non-nil empty slice", b)
	}
}

// BenchmarkPackArrays packs a pgbench-like run (2,000 rows of four values,
// one of them 84 characters) into binary text[] parameters.
func BenchmarkPackArrays(b *testing.B) {
	a := &applier{}
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

func TestArrayRows(t *testing.T) {
	// key column 0; image columns 0 (int4, has int4[]), 1 (no array type),
	// 2 (not on the target).
	e := &relEntry{Tcol: []int{0, 1, -1}, Key: []int{0}, Target: &targetTable{Columns: []targetColumn{
		{TypeOID: 23, ArrayOID: 1007}, {TypeOID: 99999},
	}}}
	row := func(kind byte, n int32, other byte) *netRow {
		return &netRow{Key: []cell{{Kind: protocol.ColumnText, Len: 2}},
			Image: []cell{{Kind: kind, Len: n}, {Kind: other, Len: 1}, {Kind: protocol.ColumnBinary, Len: 1}}}
	}
	const tx, bi, nu = protocol.ColumnText, protocol.ColumnBinary, protocol.ColumnNull
	cases := []struct {
		name    string
		rows    []*netRow
		want    bool
		wantBin []bool // image positions found binary
	}{
		{"text values", []*netRow{row(tx, 10, tx), row(protocol.ColumnUnchanged, 0, nu)}, true, []bool{false, false, false}},
		{"a value at the limit", []*netRow{row(tx, maxArrayValue, tx)}, true, []bool{false, false, false}},
		{"a value over the limit", []*netRow{row(tx, 10, tx), row(tx, maxArrayValue+1, tx)}, false, nil},
		{"text and binary in one column", []*netRow{row(tx, 10, tx), row(bi, 4, tx)}, false, nil},
		{"a binary column, NULLs in it", []*netRow{row(bi, 4, tx), row(nu, 0, tx)}, true, []bool{true, false, false}},
		{"binary, of a type without an array type", []*netRow{row(tx, 4, bi)}, false, nil},
	}
	for _, c := range cases {
		got, bin := arrayRows(e, c.rows)
		if got != c.want {
			t.Errorf("%s: arrayRows = %v, want %v", c.name, got, c.want)
			continue
		}
		if c.want && (len(bin.Image) != len(c.wantBin) || bin.Key[0]) {
			t.Errorf("%s: binary positions %+v, want image %v", c.name, bin, c.wantBin)
			continue
		}
		for i := range c.wantBin {
			if bin.Image[i] != c.wantBin[i] {
				t.Errorf("%s: binary positions %+v, want image %v", c.name, bin, c.wantBin)
			}
		}
	}
}
