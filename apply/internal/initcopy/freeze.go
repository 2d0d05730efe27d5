package initcopy

import (
	"context"
	"fmt"
)

// truncateForFreeze empties table t in the open target transaction of its
// copy with TRUNCATE ONLY when the copy may use COPY FREEZE, and reports
// whether it did. COPY FREEZE writes the rows already frozen (and marks
// their pages all-visible and all-frozen), which PostgreSQL allows only
// for a table created or truncated in the copying transaction. Without
// it, the first scan after the copy (the index builds of --schema's
// post-data, or the first VACUUM) sets every tuple's hint bits, and on a
// cluster with data checksums (initdb's default from PostgreSQL 18 on) or
// wal_log_hints each page it changes goes to the WAL whole: about seven
// times the table's size in WAL for a primary key built after a
// checkpoint (BENCHMARKS.md, issues 17 and 20).
//
// Only tables that mayFreeze qualify, and only when copied whole: a table
// copied in ranges is filled by several transactions, none of which
// created it (which is why copyWhole keeps big tables whole when ranges
// would buy no parallelism). The table was just found empty in this same
// transaction, so the TRUNCATE removes no rows.
func (w *copyWorker) truncateForFreeze(ctx context.Context, t *Table) (bool, error) {
	if !w.c.mayFreeze(t) {
		return false, nil
	}
	if _, err := w.tgt.PgConn().Exec(ctx, "TRUNCATE ONLY "+t.String()).ReadAll(); err != nil {
		return false, fmt.Errorf("copying table %s: truncating it (created by --schema, empty) for COPY FREEZE: %w", t, err)
	}
	return true, nil
}

// mayFreeze tells whether table t, copied whole, may be copied with COPY
// FREEZE: only a table this attempt's pre-data created (Copier.created,
// --schema). A table the user made is never truncated, not even an empty
// one (--schema leaves an identical empty table alone, and it is not in
// the set). A resumed copy does not know which tables an earlier attempt's
// pre-data created (it is not recorded) and copies without FREEZE. A
// partitioned target table takes no FREEZE (PostgreSQL refuses it).
func (c *Copier) mayFreeze(t *Table) bool {
	return c.Created[t.Rel] && !t.targetPartitioned
}
