package initcopy

import (
	"slices"
	"strings"
	"testing"
)

// TestCopyTableSQL: the COPY statements of a table, quoted, with its row
// filter, ONLY for a plain table.
func TestCopyTableSQL(t *testing.T) {
	tbl := &Table{Rel: Rel{Schema: `my "schema"`, Name: "t"}, copyCols: []string{"id", `we"ird`}, filter: "(id > 10)"}
	if got, want := tbl.copyOutSQL(""), `COPY (SELECT "id", "we""ird" FROM ONLY "my ""schema"""."t" WHERE (id > 10)) TO STDOUT`; got != want {
		t.Errorf("copyOutSQL = %s\nwant %s", got, want)
	}
	tbl.Partitioned, tbl.filter = true, ""
	if got, want := tbl.copyOutSQL(""), `COPY (SELECT "id", "we""ird" FROM "my ""schema"""."t") TO STDOUT`; got != want {
		t.Errorf("copyOutSQL = %s\nwant %s", got, want)
	}
	if got, want := tbl.copyInSQL(), `COPY "my ""schema"""."t" ("id", "we""ird") FROM STDIN`; got != want {
		t.Errorf("copyInSQL = %s\nwant %s", got, want)
	}
}

// TestUnionOfPublications: a table published by several publications is
// copied with the union of their columns and row filters, and whole when
// one of them has no filter.
func TestUnionOfPublications(t *testing.T) {
	f := func(s string) *string { return &s }
	for _, tc := range []struct {
		name     string
		first    *string
		more     []*string
		cols     [][]string
		want     string
		wantCols []string
	}{
		{"both filtered", f("a > 1"), []*string{f("b < 2")}, [][]string{{"id", "b"}}, "(a > 1) OR (b < 2)", []string{"id", "a", "b"}},
		{"second unfiltered", f("a > 1"), []*string{nil}, [][]string{{"id"}}, "", []string{"id", "a"}},
		{"first unfiltered", nil, []*string{f("b < 2")}, [][]string{{"c"}}, "", []string{"id", "a", "c"}},
		{"three", f("x"), []*string{f("y"), f("z")}, [][]string{{"a"}, {"z", "id"}}, "(x) OR (y) OR (z)", []string{"id", "a", "z"}},
	} {
		tbl := &Table{cols: []string{"id", "a"}}
		if tc.first != nil {
			tbl.filter = "(" + *tc.first + ")"
		}
		for i, m := range tc.more {
			tbl.union(m, tc.cols[i])
		}
		if tbl.filter != tc.want || !slices.Equal(tbl.cols, tc.wantCols) {
			t.Errorf("%s: filter %q, columns %q; want %q, %q", tc.name, tbl.filter, tbl.cols, tc.want, tc.wantCols)
		}
	}
}

// TestPublishedTablesSQL: which columns count as published, by source
// version.
func TestPublishedTablesSQL(t *testing.T) {
	for _, tc := range []struct {
		version int
		want    []string
		not     []string
	}{
		{110000, []string{"AND true", "NULL::text"}, []string{"attgenerated", "p.attnames"}},
		{120000, []string{"a.attgenerated = ''", "NULL::text"}, []string{"p.attnames"}},
		{150000, []string{"a.attname = ANY (p.attnames) AND a.attgenerated = ''", "p.rowfilter"}, nil},
		{180000, []string{"a.attname = ANY (p.attnames)", "p.rowfilter"}, []string{"attgenerated"}},
	} {
		sql := publishedTablesSQL(tc.version)
		for _, w := range tc.want {
			if !strings.Contains(sql, w) {
				t.Errorf("%d: %s lacks %q", tc.version, sql, w)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(sql, n) {
				t.Errorf("%d: %s has %q", tc.version, sql, n)
			}
		}
	}
}
