package initcopy

import (
	"github.com/walapply/walapply/apply/internal/sqlgen"
)

// sizedTable is a table to copy as wholeForFreeze sees it.
type sizedTable struct {
	name   Rel
	size   int64 // its relation size on the source (0: not read)
	freeze bool  // copied whole, it may use COPY FREEZE (Copier.mayFreeze)
}

// wholeForFreeze is the rule that copies big tables whole, with COPY
// FREEZE, rather than in ranges; it returns those tables, none when they
// keep their ranges. split is the size above which a table is big
// (SplitSize); setSplit is Config.CopySplitSize as set.
//
// Ranges cost the COPY FREEZE of a table --schema created: each range
// commits in its own transaction, none of which created or truncated the
// table, so its rows are written unfrozen, and post-data's index builds
// then set every row's hint bits, writing each page whole to the WAL where
// checksums are on (PostgreSQL 18's initdb default; freeze.go). What
// ranges buy is parallelism within one table, so that the workers finish
// together. When the big tables that may freeze are at least as many as
// the copy workers, each worker has a whole big one to itself and the
// ranges buy little, so those tables are copied whole (session 8,
// provisional, pgbench scale 0.5 and a wide table, 15 source into 18,
// two big tables on two workers: a third less target CPU, post-data 1.5
// instead of 5.0 s, the same wall time). With fewer, the ranges stay.
//
// Only with --schema (without it walapply creates no table, and none may
// freeze) and CopySplitSize left at its default: an explicit split size,
// or none (negative), is followed as set. Big tables that may not freeze
// (already on the target, or a resumed copy) neither count nor change.
func wholeForFreeze(schema bool, setSplit, split int64, workers int, tables []sizedTable) []Rel {
	if !schema || setSplit != 0 || split <= 0 {
		return nil
	}
	var whole []Rel
	for _, t := range tables {
		if t.freeze && t.size > split {
			whole = append(whole, t.name)
		}
	}
	if len(whole) < max(workers, 1) {
		return nil
	}
	return whole
}

// copyWhole applies wholeForFreeze to the tables to copy (sizes[i] is
// tables[i]'s), logs its decision, and returns the tables it keeps whole.
func (c *Copier) copyWhole(tables []*Table, sizes []tableSize, split int64, workers int) map[Rel]bool {
	in := make([]sizedTable, len(tables))
	for i, t := range tables {
		in[i] = sizedTable{name: t.Rel, size: sizes[i].size, freeze: c.mayFreeze(t)}
	}
	names := wholeForFreeze(c.Schema, c.SetSplit, split, workers, in)
	if len(names) == 0 {
		return nil
	}
	whole := make(map[Rel]bool, len(names))
	for _, n := range names {
		whole[n] = true
	}
	c.Log.Info().Str("relations", sqlgen.LogRelations(names)).Int("copy_workers", workers).Int64("split_size", split).
		Str("reason", "as many big tables as copy workers: ranges would add no parallelism, and COPY FREEZE spares post-data's index builds the hint bits").
		Msg("copying big tables whole, with COPY FREEZE, not in ranges")
	return whole
}
