package compact

import (
	"strings"
	"testing"

	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/protocol"
)

func TestWriteRowSource(t *testing.T) {
	var b strings.Builder
	WriteRowSource(&b, false, 2, []string{"integer", "text"}, nil)
	if got, want := b.String(), "VALUES ($1, $2), ($3, $4)"; got != want {
		t.Errorf("VALUES form:\n got %s\nwant %s", got, want)
	}
	b.Reset()
	WriteRowSource(&b, true, 500, []string{"integer", `"Other"."Mood"`}, nil)
	want := `SELECT _a.c1::integer AS column1, _a.c2::"Other"."Mood" AS column2 FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[]), pg_catalog.unnest($2::pg_catalog.text[])) AS _a(c1, c2)`
	if got := b.String(); got != want {
		t.Errorf("array form:\n got %s\nwant %s", got, want)
	}
	b.Reset()
	WriteRowSource(&b, true, 500, []string{"integer", "pg_catalog.text"}, []uint32{1007, 0})
	want = `SELECT _a.c1 AS column1, _a.c2::pg_catalog.text AS column2 FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2::pg_catalog.text[])) AS _a(c1, c2)`
	if got := b.String(); got != want {
		t.Errorf("array form with a binary column:\n got %s\nwant %s", got, want)
	}
	if got := RowParamOIDs(true, 500, []uint32{23, 25}, nil); len(got) != 2 || got[0] != TextArrayOID || got[1] != TextArrayOID {
		t.Errorf("array form parameter types %v", got)
	}
	if got := RowParamOIDs(true, 500, []uint32{23, 25}, []uint32{1007}); len(got) != 2 || got[0] != 1007 || got[1] != TextArrayOID {
		t.Errorf("array form parameter types with a binary column %v", got)
	}
	if got, want := ShapeName("I", true, 500, []uint32{1007, 0}), "aI-bt"; got != want {
		t.Errorf("shape %s, want %s", got, want)
	}
	if got := RowParamOIDs(false, 2, []uint32{23, 25}, nil); len(got) != 4 || got[2] != 23 || got[3] != 25 {
		t.Errorf("VALUES form parameter types %v", got)
	}
}

// An empty value read first must stay an empty value, not NULL.
func TestCompactorKeepsFirstEmptyValue(t *testing.T) {
	c := New()
	x := c.Put(&protocol.TupleColumn{Kind: protocol.ColumnText, Data: []byte{}})
	if b := c.Bytes(x); b == nil || len(b) != 0 {
		t.Fatalf("bytes of an empty text value = %#v, want a non-nil empty slice", b)
	}
}

func TestArrayRows(t *testing.T) {
	// key column 0; image columns 0 (int4, has int4[]), 1 (no array type),
	// 2 (not on the target).
	e := &relmap.Entry{Tcol: []int{0, 1, -1}, Key: []int{0}, Target: &relmap.Table{Columns: []relmap.Column{
		{TypeOID: 23, ArrayOID: 1007}, {TypeOID: 99999},
	}}}
	row := func(kind byte, n int32, other byte) *Row {
		return &Row{Key: []Cell{{Kind: protocol.ColumnText, Len: 2}},
			Image: []Cell{{Kind: kind, Len: n}, {Kind: other, Len: 1}, {Kind: protocol.ColumnBinary, Len: 1}}}
	}
	const tx, bi, nu = protocol.ColumnText, protocol.ColumnBinary, protocol.ColumnNull
	cases := []struct {
		name    string
		rows    []*Row
		want    bool
		wantBin []bool // image positions found binary
	}{
		{"text values", []*Row{row(tx, 10, tx), row(protocol.ColumnUnchanged, 0, nu)}, true, []bool{false, false, false}},
		{"a value at the limit", []*Row{row(tx, MaxArrayValue, tx)}, true, []bool{false, false, false}},
		{"a value over the limit", []*Row{row(tx, 10, tx), row(tx, MaxArrayValue+1, tx)}, false, nil},
		{"text and binary in one column", []*Row{row(tx, 10, tx), row(bi, 4, tx)}, false, nil},
		{"a binary column, NULLs in it", []*Row{row(bi, 4, tx), row(nu, 0, tx)}, true, []bool{true, false, false}},
		{"binary, of a type without an array type", []*Row{row(tx, 4, bi)}, false, nil},
	}
	for _, c := range cases {
		got, bin := ArrayRows(e, c.rows)
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
