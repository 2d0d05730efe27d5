package initcopy

import (
	"slices"
	"testing"
)

// TestBalanceRanges: the copy is cut only where a table would keep it
// waiting, and only as far as needed.
func TestBalanceRanges(t *testing.T) {
	const mb = 1 << 20
	narrow := tableWork(273*mb, 3_000_000) // issue 17's copy workload
	wide := tableWork(304*mb, 300_000)
	cases := []struct {
		name    string
		jobs    []balanceJob
		workers int
		want    []int
		minWork int64 // 0: balanceMinSize
	}{
		{"the copy workload: the narrow table in 4, the wide one whole",
			[]balanceJob{{narrow, 1, true}, {wide, 1, true}, {100, 1, true}}, 2, []int{4, 1, 1}, 0},
		{"one worker: nothing to balance",
			[]balanceJob{{narrow, 1, true}, {wide, 1, true}}, 1, []int{1, 1}, 0},
		{"already balanced (issue 20's two big tables)",
			[]balanceJob{{tableWork(640*mb, 5_000_000), 1, true}, {tableWork(1050*mb, 1_000_000), 1, true}}, 2, []int{1, 1}, 0},
		{"three equal tables on two workers: one cut in two",
			[]balanceJob{{400 * mb, 1, true}, {400 * mb, 1, true}, {400 * mb, 1, true}}, 2, []int{2, 1, 1}, 0},
		{"the test's tables (copy_balance_integration_test.go)",
			[]balanceJob{{tableWork(729<<10, 20000), 1, true}, {tableWork(1170<<10, 1000), 1, true}}, 2, []int{3, 1}, 16 << 10},
		{"the biggest cannot be cut: the next one is",
			[]balanceJob{{500 * mb, 1, false}, {500 * mb, 1, true}, {400 * mb, 1, true}}, 2, []int{1, 2, 1}, 0},
		{"the copy waits for a table that may not be cut anyway: nothing cut for nothing",
			[]balanceJob{{900 * mb, 1, false}, {900 * mb, 1, true}, {300 * mb, 1, true}}, 3, []int{1, 1, 1}, 0},
		{"the table the copy waits for may not be cut",
			[]balanceJob{{narrow, 1, false}, {wide, 1, true}}, 2, []int{1, 1}, 0},
		{"ranges would be smaller than the minimum",
			[]balanceJob{{100 * mb, 1, true}, {10 * mb, 1, true}}, 2, []int{1, 1}, 0},
		{"a table cut by the split size keeps its ranges",
			[]balanceJob{{2048 * mb, 4, true}, {10 * mb, 1, true}}, 2, []int{4, 1}, 0},
		{"one big table alone: one range per worker",
			[]balanceJob{{500 * mb, 1, true}}, 4, []int{4}, 0},
	}
	for _, c := range cases {
		if c.minWork == 0 {
			c.minWork = balanceMinSize
		}
		if got := balanceRanges(c.jobs, c.workers, c.minWork); !slices.Equal(got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

// TestBalanceMin: balancing only while the split size is left at its
// default; the seam replaces the minimum.
func TestBalanceMin(t *testing.T) {
	for _, c := range []struct{ set, seam, want int64 }{
		{0, 0, balanceMinSize}, {0, 1 << 10, 1 << 10}, {1 << 30, 0, 0}, {-1, 0, 0}, {-1, 1 << 10, 0},
	} {
		if got := BalanceMin(c.set, c.seam); got != c.want {
			t.Errorf("BalanceMin(%d, %d) = %d, want %d", c.set, c.seam, got, c.want)
		}
	}
}

// TestRangeCounts: the split size's ranges, then balance's, which leave
// alone a table that may use COPY FREEZE, a partitioned one, one without
// an integer key before PostgreSQL 14, and every table when BalanceMin is
// 0 (the split size set).
func TestRangeCounts(t *testing.T) {
	const mb = 1 << 20
	key := "id"
	narrow := &Table{Rel: Rel{Schema: "public", Name: "narrow"}, estRows: 3_000_000}
	wide := &Table{Rel: Rel{Schema: "public", Name: "wide"}, estRows: 300_000}
	big := &Table{Rel: Rel{Schema: "public", Name: "big"}, estRows: 10_000_000}
	sizes := []tableSize{{2048 * mb, 8192, &key}, {273 * mb, 8192, &key}, {304 * mb, 8192, &key}}
	keyless := []tableSize{{273 * mb, 8192, nil}, {304 * mb, 8192, &key}}
	all, two := []*Table{big, narrow, wide}, []*Table{narrow, wide}
	on := func(version int) Copier {
		return Copier{BalanceMin: balanceMinSize, Version: version, targetVersion: 180000}
	}
	target15 := on(180000)
	target15.targetVersion = 150000
	frozen := on(180000)
	frozen.Created = map[Rel]bool{narrow.Rel: true}
	cases := []struct {
		name         string
		c            Copier
		tables       []*Table
		sizes        []tableSize
		wantN        []int
		wantBalanced []bool
	}{
		{"the big table's ranges balance the copy", on(180000), all, sizes, []int{2, 1, 1}, []bool{false, false, false}},
		{"the split size's ranges only", Copier{Version: 180000}, all, sizes, []int{2, 1, 1}, []bool{false, false, false}},
		{"narrow holds the copy up: cut for balance", on(180000), two, sizes[1:], []int{4, 1}, []bool{true, false}},
		{"balancing off", Copier{Version: 180000}, two, sizes[1:], []int{1, 1}, []bool{false, false}},
		{"a PostgreSQL 15 target: not balanced", target15, two, sizes[1:], []int{1, 1}, []bool{false, false}},
		{"narrow may freeze", frozen, two, sizes[1:], []int{1, 1}, []bool{false, false}},
		{"narrow without a key before 14", on(130000), two, keyless, []int{1, 1}, []bool{false, false}},
		{"narrow without a key on 14: ctid ranges", on(140000), two, keyless, []int{4, 1}, []bool{true, false}},
	}
	for _, tc := range cases {
		n, b := tc.c.rangeCounts(tc.tables, tc.sizes, nil, 1<<30, 2)
		if !slices.Equal(n, tc.wantN) || !slices.Equal(b, tc.wantBalanced) {
			t.Errorf("%s: got %v %v, want %v %v", tc.name, n, b, tc.wantN, tc.wantBalanced)
		}
	}
	part := &Table{Rel: Rel{Schema: "public", Name: "part"}, estRows: 3_000_000, Partitioned: true}
	if n, _ := (&Copier{BalanceMin: balanceMinSize, Version: 180000, targetVersion: 180000}).rangeCounts([]*Table{part, wide}, []tableSize{{0, 8192, nil}, sizes[2]}, nil, 1<<30, 2); !slices.Equal(n, []int{1, 1}) {
		t.Errorf("a partitioned table: got %v, want [1 1]", n)
	}
}

// TestBalanceRangesManyTables: 20,000 small tables and one that may not be
// cut plan at once (the copy is not within its share, and no table may
// be cut, so every table is looked at).
func TestBalanceRangesManyTables(t *testing.T) {
	jobs := make([]balanceJob, 20_000)
	for i := range jobs {
		jobs[i] = balanceJob{work: 1 << 20, n: 1, cut: true}
	}
	jobs[0] = balanceJob{work: 1 << 40, n: 1}
	// Before the small tables were passed over unscheduled, this took
	// 13 s on a 2-core host (a schedule of 20,000 jobs per table).
	n := balanceRanges(jobs, 8, balanceMinSize)
	if slices.Max(n) != 1 {
		t.Errorf("a table was cut: %v", slices.Max(n))
	}
}
