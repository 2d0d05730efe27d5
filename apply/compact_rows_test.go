package apply

import (
	"strings"
	"testing"

	"github.com/walapply/walapply/protocol"
)

func TestAppendArrayElem(t *testing.T) {
	cases := []struct {
		in   []byte
		want string
	}{
		{nil, `NULL`},
		{[]byte{}, `""`},
		{[]byte("NULL"), `"NULL"`},
		{[]byte(`a"b`), `"a\"b"`},
		{[]byte(`c\d`), `"c\\d"`},
		{[]byte(`{x},y`), `"{x},y"`},
		{[]byte(" spaced "), `" spaced "`},
		{[]byte("ü\n"), "\"ü\n\""},
	}
	for _, c := range cases {
		if got := string(appendArrayElem(nil, c.in)); got != c.want {
			t.Errorf("appendArrayElem(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestPackArrays(t *testing.T) {
	a := &Applier{}
	// two rows of three values, row by row
	a.params = [][]byte{[]byte("1"), nil, []byte(`x"`), []byte("2"), []byte(""), []byte(`\`)}
	a.formats = []int16{0, 0, 0, 0, 0, 0}
	a.packArrays(3)
	want := []string{`{"1","2"}`, `{NULL,""}`, `{"x\"","\\"}`}
	if len(a.params) != len(want) || len(a.formats) != len(want) {
		t.Fatalf("packArrays: %d params, %d formats, want %d", len(a.params), len(a.formats), len(want))
	}
	for i, w := range want {
		if string(a.params[i]) != w || a.formats[i] != 0 {
			t.Errorf("column %d: %s (format %d), want %s", i, a.params[i], a.formats[i], w)
		}
	}
}

func TestWriteRowSource(t *testing.T) {
	var b strings.Builder
	writeRowSource(&b, false, 2, []string{"integer", "text"})
	if got, want := b.String(), "VALUES ($1, $2), ($3, $4)"; got != want {
		t.Errorf("VALUES form:\n got %s\nwant %s", got, want)
	}
	b.Reset()
	writeRowSource(&b, true, 500, []string{"integer", `"Other"."Mood"`})
	want := `SELECT _a.c1::integer AS column1, _a.c2::"Other"."Mood" AS column2 FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[]), pg_catalog.unnest($2::pg_catalog.text[])) AS _a(c1, c2)`
	if got := b.String(); got != want {
		t.Errorf("array form:\n got %s\nwant %s", got, want)
	}
	if got := rowParamOIDs(true, 500, []uint32{23, 25}); len(got) != 2 || got[0] != textArrayOID || got[1] != textArrayOID {
		t.Errorf("array form parameter types %v", got)
	}
	if got := rowParamOIDs(false, 2, []uint32{23, 25}); len(got) != 4 || got[2] != 23 || got[3] != 25 {
		t.Errorf("VALUES form parameter types %v", got)
	}
}

// An empty value read first must stay an empty value, not NULL.
func TestCompactorKeepsFirstEmptyValue(t *testing.T) {
	c := newCompactor()
	x := c.put(&protocol.TupleColumn{Kind: protocol.ColumnText, Data: []byte{}})
	if b := c.bytes(x); b == nil || len(b) != 0 {
		t.Fatalf("bytes of an empty text value = %#v, want a non-nil empty slice", b)
	}
}

// BenchmarkPackArrays packs a pgbench-like run (2,000 rows of four values,
// one of them 84 characters) into text[] literals.
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
		a.packArrays(4)
	}
}

func TestArrayRows(t *testing.T) {
	row := func(kind byte, n int32) *netRow {
		return &netRow{key: []cell{{kind: protocol.ColumnText, len: 2}}, image: []cell{{kind: kind, len: n}, {kind: protocol.ColumnNull}}}
	}
	cases := []struct {
		name string
		rows []*netRow
		want bool
	}{
		{"text values", []*netRow{row(protocol.ColumnText, 10), row(protocol.ColumnUnchanged, 0)}, true},
		{"a value at the limit", []*netRow{row(protocol.ColumnText, maxArrayValue)}, true},
		{"a value over the limit", []*netRow{row(protocol.ColumnText, 10), row(protocol.ColumnText, maxArrayValue+1)}, false},
		{"a binary value", []*netRow{row(protocol.ColumnText, 10), row(protocol.ColumnBinary, 4)}, false},
	}
	for _, c := range cases {
		if got := arrayRows(c.rows); got != c.want {
			t.Errorf("%s: arrayRows = %v, want %v", c.name, got, c.want)
		}
	}
}
