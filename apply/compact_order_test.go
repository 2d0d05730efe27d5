package apply

import (
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
	c := newCompactor()
	row := func(key ...protocol.TupleColumn) *netRow {
		r := &netRow{kind: netUpdate}
		for i := range key {
			r.key = append(r.key, c.put(&key[i]))
		}
		return r
	}
	render := func(rows []*netRow) string {
		var parts []string
		for _, r := range rows {
			var vs []string
			for _, x := range r.key {
				if x.kind == protocol.ColumnNull {
					vs = append(vs, "NULL")
				} else {
					vs = append(vs, string(c.bytes(x)))
				}
			}
			parts = append(parts, strings.Join(vs, "/"))
		}
		return strings.Join(parts, " ")
	}
	rows := []*netRow{
		row(txt("100"), txt("b")), row(txt("9"), txt("z")), row(txt("-5"), txt("a")),
		row(txt("100"), txt("a")), row(null, txt("q")), row(txt("x1"), txt("a")), row(txt("10"), txt("a")),
	}
	rand.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
	c.sortByKey(rows)
	if got, want := render(rows), "NULL/q -5/a 9/z 10/a 100/a 100/b x1/a"; got != want {
		t.Errorf("sorted keys: %s, want %s", got, want)
	}
	// Big-endian binary integers sort by value.
	var bins []*netRow
	for _, v := range []byte{7, 1, 200, 3} {
		bins = append(bins, row(bin(0, 0, 0, v)))
	}
	c.sortByKey(bins)
	var got []byte
	for _, r := range bins {
		got = append(got, c.bytes(r.key[0])[3])
	}
	if !slices.Equal(got, []byte{1, 3, 7, 200}) {
		t.Errorf("binary keys sorted as %v", got)
	}
}
