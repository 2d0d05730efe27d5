package copydata

import (
	"bytes"
	"testing"

	"github.com/walapply/walapply/apply/internal/compact"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/protocol"
)

// copyRows builds net rows in c from tuples of (kind, value) pairs.
func copyRows(c *compact.Compactor, tuples ...[]protocol.TupleColumn) []*compact.Row {
	var rows []*compact.Row
	for _, t := range tuples {
		r := &compact.Row{Kind: compact.NetInsert}
		for i := range t {
			r.Image = append(r.Image, c.Put(&t[i]))
		}
		rows = append(rows, r)
	}
	return rows
}

func txt(s string) protocol.TupleColumn {
	return protocol.TupleColumn{Kind: protocol.ColumnText, Data: []byte(s)}
}
func bin(b ...byte) protocol.TupleColumn {
	return protocol.TupleColumn{Kind: protocol.ColumnBinary, Data: b}
}

var (
	null      = protocol.TupleColumn{Kind: protocol.ColumnNull}
	unchanged = protocol.TupleColumn{Kind: protocol.ColumnUnchanged}
)

func TestRowsFormat(t *testing.T) {
	for _, tc := range []struct {
		name string
		rows [][]protocol.TupleColumn
		cols []int
		want byte
	}{
		{"text", [][]protocol.TupleColumn{{txt("1"), txt("a")}, {txt("2"), null}}, []int{0, 1}, protocol.ColumnText},
		{"only NULLs", [][]protocol.TupleColumn{{null, unchanged}}, []int{0, 1}, protocol.ColumnText},
		{"binary", [][]protocol.TupleColumn{{bin(0, 1), null}, {bin(0, 2), bin(9)}}, []int{0, 1}, protocol.ColumnBinary},
		{"text and binary in one row", [][]protocol.TupleColumn{{bin(0, 1), txt("a")}}, []int{0, 1}, 0},
		{"text and binary in two rows", [][]protocol.TupleColumn{{txt("1")}, {bin(0, 2)}}, []int{0}, 0},
		{"a column not written", [][]protocol.TupleColumn{{txt("1"), bin(7)}}, []int{0}, protocol.ColumnText},
	} {
		c := compact.New()
		if got := RowsFormat(copyRows(c, tc.rows...), tc.cols); got != tc.want {
			t.Errorf("%s: copyFormatOf = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// The text format escapes backslash, tab, newline and carriage return,
// writes NULL and unchanged TOAST values as \N, and leaves columns that
// are not written out.
func TestAppendRowsText(t *testing.T) {
	c := compact.New()
	rows := copyRows(c,
		[]protocol.TupleColumn{txt("1"), txt("a\tb\nc\rd\\e"), txt("skip"), null},
		[]protocol.TupleColumn{txt("2"), txt(`\N`), txt("skip"), unchanged},
		[]protocol.TupleColumn{txt("3"), txt(""), txt("skip"), txt("ünï")},
	)
	got := AppendRows(c, []byte("prefix:"), rows, []int{0, 1, 3}, protocol.ColumnText)
	want := "prefix:" +
		"1\ta\\tb\\nc\\rd\\\\e\t\\N\n" +
		"2\t\\\\N\t\\N\n" +
		"3\t\tünï\n"
	if string(got) != want {
		t.Errorf("AppendRows text:\n got %q\nwant %q", got, want)
	}
}

// The binary format: signature, flags and extension length, then per row
// the field count and each field's length (-1 for NULL) and bytes, then
// the trailer.
func TestAppendRowsBinary(t *testing.T) {
	c := compact.New()
	rows := copyRows(c,
		[]protocol.TupleColumn{bin(0, 0, 0, 1), bin('x'), null},
		[]protocol.TupleColumn{bin(0, 0, 0, 2), bin(), unchanged},
	)
	got := AppendRows(c, nil, rows, []int{0, 2, 1}, protocol.ColumnBinary)
	want := []byte("PGCOPY\n\xff\r\n\x00")
	want = append(want, 0, 0, 0, 0, 0, 0, 0, 0) // flags, header extension length
	want = append(want,
		0, 3, // fields
		0, 0, 0, 4, 0, 0, 0, 1,
		0xff, 0xff, 0xff, 0xff, // NULL
		0, 0, 0, 1, 'x',
		0, 3,
		0, 0, 0, 4, 0, 0, 0, 2,
		0xff, 0xff, 0xff, 0xff, // unchanged TOAST: NULL in an insert
		0, 0, 0, 0, // an empty value is not NULL
		0xff, 0xff, // trailer
	)
	if !bytes.Equal(got, want) {
		t.Errorf("AppendRows binary:\n got %v\nwant %v", got, want)
	}
}

// TestAppendText: COPY's text escapes, and nothing else escaped.
func TestAppendText(t *testing.T) {
	for in, want := range map[string]string{
		"":                  "",
		"plain ✓":           "plain ✓",
		"a\tb\nc\rd\\e":     `a\tb\nc\rd\\e`,
		`\N`:                `\\N`,
		"\\\\\t\t":          `\\\\\t\t`,
		"end\\":             `end\\`,
		"{\"a\\\\b\",NULL}": `{"a\\\\b",NULL}`,
	} {
		if got := string(AppendText([]byte("x"), []byte(in))); got != "x"+want {
			t.Errorf("AppendText(%q) = %q, want %q", in, got[1:], want)
		}
	}
}

// TestAppendTupleAsRows: a decoded tuple (the spill replay's and the
// parallel workers' source) encodes to the same bytes as the net row of the
// same values (compaction's), leaving out a generated target column, in
// both formats; TupleFormat and RowsFormat agree on the format.
func TestAppendTupleAsRows(t *testing.T) {
	e := &relmap.Entry{
		Rel:  &protocol.Relation{Columns: make([]protocol.RelationColumn, 4)},
		Tcol: []int{0, 1, -1, 2}, // source column 2 is generated on the target
	}
	cols := []int{0, 1, 3}
	for _, tc := range []struct {
		name   string
		tuples [][]protocol.TupleColumn
		format byte
	}{
		{"text", [][]protocol.TupleColumn{{txt("1"), txt("a\tb"), txt("gen"), null}, {txt("2"), txt(""), txt("gen"), unchanged}}, protocol.ColumnText},
		{"binary", [][]protocol.TupleColumn{{bin(0, 1), bin('x'), bin(7), null}, {bin(0, 2), bin(), bin(7), unchanged}}, protocol.ColumnBinary},
	} {
		c := compact.New()
		want := AppendRows(c, nil, copyRows(c, tc.tuples...), cols, tc.format)
		if f := RowsFormat(copyRows(c, tc.tuples...), cols); f != tc.format {
			t.Errorf("%s: RowsFormat = %q, want %q", tc.name, f, tc.format)
		}
		var got []byte
		if tc.format == protocol.ColumnBinary {
			got = append(got, BinaryHeader...)
		}
		for _, tu := range tc.tuples {
			td := &protocol.TupleData{Columns: tu}
			if f := TupleFormat(e, td, 0); f != tc.format {
				t.Errorf("%s: TupleFormat = %q, want %q", tc.name, f, tc.format)
			}
			got = AppendTuple(got, e, td, tc.format)
		}
		if tc.format == protocol.ColumnBinary {
			got = append(got, BinaryTrailer...)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: AppendTuple gives\n %q\nAppendRows\n %q", tc.name, got, want)
		}
	}
	mixed := &protocol.TupleData{Columns: []protocol.TupleColumn{txt("1"), bin(1), txt("gen"), null}}
	if f := TupleFormat(e, mixed, 0); f != 0 {
		t.Errorf("a tuple mixing text and binary: TupleFormat = %q, want 0", f)
	}
}
