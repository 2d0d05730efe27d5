package initcopy

import (
	"cmp"
	"slices"
)

// Balancing: the copy's workers finish together.
//
// The split size alone leaves a copy waiting for its biggest table. Issue
// 17's copy workload (3 million narrow rows, 273 MB, and 300,000 rows of
// 1 kB, 304 MB, two workers, PostgreSQL 18, quiet) copied the wide table
// in 4.3 s and the narrow one in 8.3 s: neither reaches the 1 GiB split
// size, so one worker, and the core it would use, idled for half the
// copy. So with the split size at its default, a table that would hold
// the copy up is also cut into ranges (balanceRanges): enough of them that
// the workers, taking the jobs largest first, end within a tenth of an
// even share of the whole copy's work.
//
// Bytes do not measure that work: the narrow table has fewer bytes than
// the wide one and took twice as long. Most of a copy's CPU is the
// target's, per row (the tuple, its index entries, its WAL record) and per
// byte. From the two tables above, about 1.6 µs a row and 12.5 ns a byte:
// a row weighs about as much as 128 bytes (copyRowWeight), and a table's
// work is its relation size plus its estimated rows times that.
//
// Ranges of one table copied at once cost the target CPU and index size
// where its indexes are in place (ranges.go says how much), so the rule
// cuts only what would hold the copy up, and no range below
// balanceMinSize; the ranges of a table run in key order, lowest first,
// so that two of them overlap in time only where the workers meet at the
// end. With --schema the indexes are built after the copy and ranges cost
// nothing of the kind.
//
// What the balance buys is a core the copy leaves idle; what it costs is
// CPU: a key range read through the source's index, and two ranges of one
// table written at once into one index and one relation. Where the source,
// the target and walapply share two cores, the two nearly cancel. Issue
// 17's copy workload, 3 rounds each, walapply with balance against
// without: a PostgreSQL 18 target took 0.97 of the time quiet and 0.94
// with a CPU-bound neighbour per core, at 0.3 s more source and 0.7 s
// more target CPU; a PostgreSQL 15 target 1.02 and 0.96. PostgreSQL 16
// made a relation grown by concurrent writers cheaper (it extends by many
// pages at once, where 15 adds one at a time under the extension lock):
// the likely difference, not traced here. So balancing starts with 16
// targets (balanceMinTarget). Where the target has cores to spare (not
// measurable on that 2-core host), the idle half of the copy is what
// balancing should win back.
const (
	// balanceMinTarget is the oldest target (server_version_num) the
	// copy is balanced into.
	balanceMinTarget = 160000
	copyRowWeight    = 128
	balanceMinSize   = 64 << 20
	// balanceSlack is how far over an even share (in tenths) the longest
	// worker may end.
	balanceSlack = 11
	// balanceMaxPerWorker bounds the ranges balancing cuts a table into.
	balanceMaxPerWorker = 4
)

// BalanceMin is Copier.BalanceMin: balanceMinSize, or seam when positive
// (apply's SetBalanceMin, for tests), while the split size is left at its
// default (set is Config.CopySplitSize: 0); else 0, no balancing (a split
// size set is followed as set).
func BalanceMin(set, seam int64) int64 {
	switch {
	case set != 0:
		return 0
	case seam > 0:
		return seam
	default:
		return balanceMinSize
	}
}

// balanceJob is one table as balanceRanges sees it.
type balanceJob struct {
	work int64 // the table's work (relation size plus rows × copyRowWeight)
	n    int   // ranges it is cut into already (1: whole)
	// cut: it may be cut into (more) ranges (not partitioned, a key or
	// TID range scans, not kept whole or free to use COPY FREEZE); how
	// small a range may be is balanceRanges' minWork.
	cut bool
}

// tableWork is a table's work for balanceRanges: its relation size on the
// source plus its estimated rows weighed by copyRowWeight.
func tableWork(size, rows int64) int64 { return size + max(rows, 0)*copyRowWeight }

// balanceRanges returns how many ranges each table is cut into so that
// workers, each taking the largest job left (planJobs' order), end within
// balanceSlack of an even share of the work. It cuts the tables one at a
// time, the one of most work first, each into the fewest ranges that
// bring the copy within that (or, when none does, that end it soonest),
// at most balanceMaxPerWorker per worker and none of less than minWork;
// it stops as soon as the copy is within. So what holds the copy up is
// cut, and as few of its ranges as may overlap in time. A table's count
// only grows.
func balanceRanges(jobs []balanceJob, workers int, minWork int64) []int {
	n := make([]int, len(jobs))
	var total int64
	for i, j := range jobs {
		n[i] = max(j.n, 1)
		total += j.work
	}
	if workers < 2 || total == 0 {
		return n
	}
	within := func(end int64) bool { return end*10 <= total/int64(workers)*balanceSlack }
	order := make([]int, len(jobs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(jobs[b].work, jobs[a].work) })
	for _, i := range order {
		j := jobs[i]
		if !j.cut || j.work/int64(n[i]+1) < minWork {
			continue // before scheduling: a copy of many small tables plans fast
		}
		end := schedule(jobs, n, workers)
		if within(end) {
			break
		}
		best, bestEnd := n[i], end
		for k := n[i] + 1; k <= min(balanceMaxPerWorker*workers, copyMaxRanges) && j.work/int64(k) >= minWork; k++ {
			n[i] = k
			e := schedule(jobs, n, workers)
			if e < bestEnd {
				best, bestEnd = k, e
			}
			if within(e) {
				break
			}
		}
		n[i] = best
	}
	return n
}

// schedule is when the last of workers ends, each taking the largest job
// left when it is free (table i as n[i] equal jobs).
func schedule(jobs []balanceJob, n []int, workers int) int64 {
	var js []int64
	for i, j := range jobs {
		for range n[i] {
			js = append(js, j.work/int64(n[i]))
		}
	}
	slices.SortFunc(js, func(a, b int64) int { return cmp.Compare(b, a) })
	free := make([]int64, workers)
	for _, w := range js {
		k := 0
		for i := range free {
			if free[i] < free[k] {
				k = i
			}
		}
		free[k] += w
	}
	return slices.Max(free)
}
