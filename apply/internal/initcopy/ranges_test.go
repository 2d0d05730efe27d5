package initcopy

import (
	"math"
	"slices"
	"strings"
	"testing"
)

// TestSplitSpan: the inner bounds cut lo..hi into about equal ranges,
// never more ranges than values, also at the ends of bigint.
func TestSplitSpan(t *testing.T) {
	for _, c := range []struct {
		lo, hi, n int64
		want      []int64
	}{
		{1, 100, 4, []int64{26, 51, 76}},
		{0, 9, 3, []int64{3, 6}},
		{5, 6, 8, []int64{6}},
		{7, 7, 8, nil},
		{-10, 9, 2, []int64{0}},
		{math.MinInt64, math.MaxInt64, 2, []int64{0}},
	} {
		if got := splitSpan(c.lo, c.hi, c.n); !slices.Equal(got, c.want) {
			t.Errorf("splitSpan(%d, %d, %d) = %v, want %v", c.lo, c.hi, c.n, got, c.want)
		}
	}
}

// TestRangeConditions: the ranges cover every value once, the first and
// the last open, and combine with a row filter.
func TestRangeConditions(t *testing.T) {
	tbl := &Table{Rel: Rel{Schema: "s", Name: "t"}, copyCols: []string{"id"}, filter: "(id > 10)"}
	var conds []string
	for _, r := range makeRanges(tbl, "id", []int64{100, 200}) {
		conds = append(conds, r.String()+" "+r.cond())
	}
	if want := []string{`1/3 "id" < 100`, `2/3 "id" >= 100 AND "id" < 200`, `3/3 "id" >= 200`}; !slices.Equal(conds, want) {
		t.Errorf("key ranges: %q, want %q", conds, want)
	}
	rs := makeRanges(tbl, ctidColumn, []int64{8})
	if got, want := rs[1].cond(), `ctid >= '(8,0)'::pg_catalog.tid`; got != want {
		t.Errorf("last ctid range: %q, want %q", got, want)
	}
	if got := tbl.copyOutSQL(rs[0].cond()); !strings.HasSuffix(got, `WHERE (id > 10) AND ctid < '(8,0)'::pg_catalog.tid) TO STDOUT`) {
		t.Errorf("copyOutSQL with a row filter and a range: %s", got)
	}
	if makeRanges(tbl, "id", nil) != nil {
		t.Error("no bounds: want no ranges (the table is copied whole)")
	}
}

// TestSplitSizeDefault: with Schema (indexes built after the copy),
// tables above 256 MiB are copied in ranges, otherwise above 1 GiB, unless
// told otherwise.
func TestSplitSizeDefault(t *testing.T) {
	for _, c := range []struct {
		set    int64
		schema bool
		want   int64
	}{
		{0, false, 1 << 30}, {0, true, 256 << 20}, {-1, true, 0}, {-1, false, 0}, {64 << 20, false, 64 << 20}, {2 << 30, true, 2 << 30},
	} {
		if got := SplitSize(c.set, 0, c.schema); got != c.want {
			t.Errorf("CopySplitSize %d, Schema %v: SplitSize = %d, want %d", c.set, c.schema, got, c.want)
		}
	}
}
