package initcopy

import (
	"context"
	"fmt"
	"math/big"

	"github.com/walapply/walapply/apply/internal/sqlgen"
)

// tableSize is what a table's split reads of it on the source, in the
// snapshot: its relation size (0 for a partitioned table, never split),
// the block size, and its primary key column when that is a single
// integer column.
type tableSize struct {
	size, blockSize int64
	key             *string
}

// sizeTable reads table t's tableSize in the worker's snapshot.
func (w *copyWorker) sizeTable(ctx context.Context, t *Table) (tableSize, error) {
	var s tableSize
	if t.Partitioned {
		return s, nil
	}
	if err := w.src.QueryRow(ctx, splitTableSQL, t.String()).Scan(&s.size, &s.blockSize, &s.key); err != nil {
		return s, fmt.Errorf("reading the size of table %s on the source: %w", t, err)
	}
	return s, nil
}

// cutTable cuts a table into n ranges (rangeCounts) in the worker's
// snapshot; none when it is copied whole after all (an empty table, or no
// TID range scans before PostgreSQL 14).
func (w *copyWorker) cutTable(ctx context.Context, t *Table, ts tableSize, n int) ([]*copyRange, error) {
	size, blockSize, key := ts.size, ts.blockSize, ts.key
	if key != nil {
		var lo, hi *int64
		q := "SELECT min(" + sqlgen.QuoteIdent(*key) + ")::bigint, max(" + sqlgen.QuoteIdent(*key) + ")::bigint FROM " + FromItem(t.String(), false)
		if err := w.src.QueryRow(ctx, q).Scan(&lo, &hi); err != nil {
			return nil, fmt.Errorf("reading the key range of table %s on the source: %w", t, err)
		}
		if lo == nil {
			return nil, nil
		}
		return makeRanges(t, *key, splitSpan(*lo, *hi, int64(n))), nil
	}
	if w.c.Version < 140000 {
		return nil, nil // no TID range scans: each range would read the whole table
	}
	blocks := size / blockSize
	if blocks < 2 {
		return nil, nil
	}
	return makeRanges(t, ctidColumn, splitSpan(0, blocks-1, int64(n))), nil
}

// rangeCounts is how many ranges each table is cut into (1: copied
// whole): those above split into at least workers ranges and at most
// split each, unless copyWhole keeps them whole; then, with the split
// size at its default (c.BalanceMin set), as balanceRanges adds so that
// the workers end together (balanced[i]: it added ranges to table i),
// into a target of PostgreSQL 16 or later (balanceMinTarget). A
// table that may use COPY FREEZE (freeze.go) is not cut for balance: its
// ranges could not freeze.
func (c *Copier) rangeCounts(tables []*Table, sizes []tableSize, whole map[Rel]bool, split int64, workers int) (n []int, balanced []bool) {
	in := make([]balanceJob, len(tables))
	n, balanced = make([]int, len(tables)), make([]bool, len(tables))
	for i, t := range tables {
		size := sizes[i].size
		cuttable := split > 0 && size > 0 && !t.Partitioned && !whole[t.Rel] && (sizes[i].key != nil || c.Version >= 140000)
		in[i] = balanceJob{work: tableWork(size, t.estRows), n: 1, cut: cuttable && !c.mayFreeze(t)}
		if cuttable && size > split {
			in[i].n = int(min(max(int64(workers), (size+split-1)/split), copyMaxRanges))
		}
		n[i] = in[i].n
	}
	if c.BalanceMin <= 0 || c.targetVersion < balanceMinTarget {
		return n, balanced
	}
	for i, k := range balanceRanges(in, workers, c.BalanceMin) {
		balanced[i] = k > n[i]
		n[i] = k
	}
	return n, balanced
}

// splitSpan cuts the values lo..hi (both included) into at most n ranges
// of about equal width, as their n-1 inner bounds.
func splitSpan(lo, hi int64, n int64) []int64 {
	width := new(big.Int).Sub(big.NewInt(hi), big.NewInt(lo))
	width.Add(width, big.NewInt(1))
	if width.Cmp(big.NewInt(n)) < 0 {
		n = width.Int64()
	}
	var bounds []int64
	for i := int64(1); i < n; i++ {
		b := new(big.Int).Mul(width, big.NewInt(i))
		b.Quo(b, big.NewInt(n))
		b.Add(b, big.NewInt(lo))
		bounds = append(bounds, b.Int64())
	}
	return bounds
}

// makeRanges makes the ranges between the inner bounds; the first and the
// last are open.
func makeRanges(t *Table, by string, bounds []int64) []*copyRange {
	if len(bounds) == 0 {
		return nil
	}
	rs := make([]*copyRange, len(bounds)+1)
	for i := range rs {
		r := &copyRange{t: t, no: i, of: len(rs), by: by}
		if i > 0 {
			r.lo = &bounds[i-1]
		}
		if i < len(bounds) {
			r.hi = &bounds[i]
		}
		rs[i] = r
	}
	return rs
}

// splitTableSQL reads a table's size, the block size and its primary key
// column when that is a single integer column.
const splitTableSQL = `SELECT pg_catalog.pg_relation_size(c.oid), pg_catalog.current_setting('block_size')::bigint,
	(SELECT a.attname::text FROM pg_catalog.pg_index i
	 JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
	 WHERE i.indrelid = c.oid AND i.indisprimary AND i.indnatts = 1
	   AND a.atttypid IN ('pg_catalog.int2'::pg_catalog.regtype, 'pg_catalog.int4'::pg_catalog.regtype, 'pg_catalog.int8'::pg_catalog.regtype))
FROM pg_catalog.pg_class c WHERE c.oid = $1::pg_catalog.regclass`
