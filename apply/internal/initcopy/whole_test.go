package initcopy

import (
	"slices"
	"testing"
)

// TestWholeForFreeze: with --schema and the default split size, the big
// tables that may freeze are copied whole when they are at least as many
// as the copy workers, else in ranges; small tables, tables that may not
// freeze, an explicit split size (or none) and a copy without --schema
// change nothing.
func TestWholeForFreeze(t *testing.T) {
	const split = 100
	a, b, c := Rel{Schema: "s", Name: "a"}, Rel{Schema: "s", Name: "b"}, Rel{Schema: "s", Name: "c"}
	big := func(n Rel) sizedTable { return sizedTable{name: n, size: split + 1, freeze: true} }
	kept := func(n Rel) sizedTable { return sizedTable{name: n, size: 5 * split} } // on the target already
	small := func(n Rel) sizedTable { return sizedTable{name: n, size: split, freeze: true} }
	for _, tc := range []struct {
		name     string
		schema   bool
		setSplit int64
		split    int64
		workers  int
		tables   []sizedTable
		want     []Rel
	}{
		{"two big, two workers", true, 0, split, 2, []sizedTable{big(a), big(b), small(c)}, []Rel{a, b}},
		{"three big, two workers", true, 0, split, 2, []sizedTable{big(a), big(b), big(c)}, []Rel{a, b, c}},
		{"one big, one worker", true, 0, split, 1, []sizedTable{big(a), small(b)}, []Rel{a}},
		{"one big, two workers", true, 0, split, 2, []sizedTable{big(a)}, nil},
		{"two big, four workers", true, 0, split, 4, []sizedTable{big(a), big(b)}, nil},
		{"at the split size is not big", true, 0, split, 2, []sizedTable{big(a), small(b)}, nil},
		{"a big one that may not freeze does not count", true, 0, split, 2, []sizedTable{big(a), kept(b)}, nil},
		{"nor is it kept whole", true, 0, split, 1, []sizedTable{big(a), kept(b)}, []Rel{a}},
		{"resumed: none may freeze", true, 0, split, 2, []sizedTable{kept(a), kept(b)}, nil},
		{"without --schema", false, 0, split, 2, []sizedTable{big(a), big(b)}, nil},
		{"explicit split size", true, split, split, 2, []sizedTable{big(a), big(b)}, nil},
		{"splitting off", true, -1, 0, 2, []sizedTable{big(a), big(b)}, nil},
		{"no tables", true, 0, split, 2, nil, nil},
	} {
		if got := wholeForFreeze(tc.schema, tc.setSplit, tc.split, tc.workers, tc.tables); !slices.Equal(got, tc.want) {
			t.Errorf("%s: wholeForFreeze = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestSplitDefaultSeam: the seam's size (apply's SetSplitDefault) replaces both defaults, and
// only the defaults.
func TestSplitDefaultSeam(t *testing.T) {
	for _, c := range []struct {
		set, seam, want int64
		schema          bool
	}{
		{0, 64 << 10, 64 << 10, true}, {0, 64 << 10, 64 << 10, false}, {-1, 64 << 10, 0, true}, {1 << 20, 64 << 10, 1 << 20, true},
	} {
		if got := SplitSize(c.set, c.seam, c.schema); got != c.want {
			t.Errorf("CopySplitSize %d, seam %d, Schema %v: SplitSize = %d, want %d", c.set, c.seam, c.schema, got, c.want)
		}
	}
}
