package compact

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/walapply/walapply/protocol"
)

func TestCompareDecimal(t *testing.T) {
	ints := []int64{-1000, -99, -10, -9, -1, 0, 1, 2, 9, 10, 11, 99, 100, 123456789}
	for _, a := range ints {
		for _, b := range ints {
			want := 0
			if a < b {
				want = -1
			} else if a > b {
				want = 1
			}
			as, bs := strconv.FormatInt(a, 10), strconv.FormatInt(b, 10)
			if !isDecimal([]byte(as)) {
				t.Fatalf("isDecimal(%q) = false", as)
			}
			if got := compareDecimal([]byte(as), []byte(bs)); got != want {
				t.Errorf("compareDecimal(%s, %s) = %d, want %d", as, bs, got, want)
			}
		}
	}
	for _, s := range []string{"", "-", "01", "1.5", "1e3", "abc", " 1", "--1"} {
		if isDecimal([]byte(s)) {
			t.Errorf("isDecimal(%q) = true", s)
		}
	}
}

// Keys sort by value where they are integers in text form, by bytes
// otherwise, NULLs first, column by column.
func TestSortByKey(t *testing.T) {
	c := New()
	row := func(key ...protocol.TupleColumn) *Row {
		r := &Row{Kind: NetUpdate}
		for i := range key {
			r.Key = append(r.Key, c.Put(&key[i]))
		}
		return r
	}
	render := func(rows []*Row) string {
		var parts []string
		for _, r := range rows {
			var vs []string
			for _, x := range r.Key {
				if x.Kind == protocol.ColumnNull {
					vs = append(vs, "NULL")
				} else {
					vs = append(vs, string(c.Bytes(x)))
				}
			}
			parts = append(parts, strings.Join(vs, "/"))
		}
		return strings.Join(parts, " ")
	}
	rows := []*Row{
		row(txt("100"), txt("b")), row(txt("9"), txt("z")), row(txt("-5"), txt("a")),
		row(txt("100"), txt("a")), row(null, txt("q")), row(txt("x1"), txt("a")), row(txt("10"), txt("a")),
	}
	rand.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
	c.SortByKey(rows)
	if got, want := render(rows), "NULL/q -5/a 9/z 10/a 100/a 100/b x1/a"; got != want {
		t.Errorf("sorted keys: %s, want %s", got, want)
	}
	// One integer column: by value, read once per row (sortByIntKey).
	for _, tc := range []struct {
		keys []string
		want string
	}{
		{[]string{"100", "-7", "9", "0", "-100", "123456789012345678", "10"}, "-100 -7 0 9 10 100 123456789012345678"},
		// Not all integers, or one too long to read cheaply: compared in
		// pairs (integers by value, the rest by bytes).
		{[]string{"100", "9", "x", "10"}, "9 10 100 x"},
		{[]string{"1234567890123456789", "2", "10"}, "2 10 1234567890123456789"},
	} {
		var rs []*Row
		for _, k := range tc.keys {
			rs = append(rs, row(txt(k)))
		}
		c.SortByKey(rs)
		if got := render(rs); got != tc.want {
			t.Errorf("keys %q sorted as %s, want %s", tc.keys, got, tc.want)
		}
	}
	// Big-endian binary integers of 2, 4 and 8 bytes sort by value.
	for _, width := range []int{2, 4, 8} {
		var bins []*Row
		for _, v := range []int64{7, -2, 1, 200, 3} {
			b := make([]byte, 8)
			binary.BigEndian.PutUint64(b, uint64(v))
			bins = append(bins, row(bin(b[8-width:]...)))
		}
		c.SortByKey(bins)
		var got []int64
		for _, r := range bins {
			v, _ := c.intValue(r.Key[0])
			got = append(got, v)
		}
		if !slices.Equal(got, []int64{-2, 1, 3, 7, 200}) {
			t.Errorf("%d-byte binary keys sorted as %v", width, got)
		}
	}
	if len(c.intKeys) != 0 || slices.ContainsFunc(c.intKeys[:cap(c.intKeys)], func(k intKeyRow) bool { return k.r != nil }) {
		t.Error("sortByIntKey's buffer still holds rows")
	}
}

// BenchmarkSortByKey sorts a write-out's worth of pgbench_accounts keys.
func BenchmarkSortByKey(b *testing.B) {
	c := New()
	var rows []*Row
	for range 10000 {
		k := txt(strconv.Itoa(rand.IntN(1000000) + 1))
		rows = append(rows, &Row{Kind: NetUpdate, Key: []Cell{c.Put(&k)}})
	}
	b.ReportAllocs()
	for b.Loop() {
		rand.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
		c.SortByKey(rows)
	}
}

func txt(s string) protocol.TupleColumn {
	return protocol.TupleColumn{Kind: protocol.ColumnText, Data: []byte(s)}
}

func bin(b ...byte) protocol.TupleColumn {
	return protocol.TupleColumn{Kind: protocol.ColumnBinary, Data: b}
}

var null = protocol.TupleColumn{Kind: protocol.ColumnNull}
