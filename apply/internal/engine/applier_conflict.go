package engine

import (
	"fmt"

	"github.com/walapply/walapply/apply/internal/pipeline"
)

// conflicted logs and counts a conflict a statement recorded.
func (a *Applier) conflicted(q *pipeline.Stmt, key string) {
	a.Stats.Conflicts.Add(q.Conflict)
	if q.Conflict == ConflictUpdateMissing || q.Conflict == ConflictDeleteMissing {
		a.Stats.MissingRows.Add(1)
	}
	a.log.Warn().Str("conflict", q.Conflict).Str("resolution", a.resolution(q.Conflict)).Str("relation", q.Rel.LogName()).
		Str("key", key).Uint32("xid", q.Xid).Stringer("commit_lsn", q.CommitLSN).Msg("conflict")
}

func (a *Applier) resolution(kind string) string {
	if a.policies[kind] == PolicyApply && kind != ConflictDeleteMissing {
		return "applied"
	}
	return "skipped"
}

// rowMissing logs an UPDATE or DELETE that found no row; like PostgreSQL's
// subscriber, it is skipped (update_missing / delete_missing).
func (a *Applier) rowMissing(q *pipeline.Stmt, n int, key string) {
	a.Stats.MissingRows.Add(int64(n))
	kind := "update_missing"
	if q.Op == pipeline.OpDelete {
		kind = "delete_missing"
	}
	for i := 0; i < n; i++ {
		a.Stats.Conflicts.Add(kind)
	}
	if q.Rows > 1 {
		key = fmt.Sprintf("%d of the %d rows with keys %s", n, q.Rows, key)
	}
	a.log.Warn().Str("conflict", kind).Str("relation", q.Rel.LogName()).Str("key", key).
		Uint32("xid", q.Xid).Stringer("commit_lsn", q.CommitLSN).
		Msg("row to change not found on the target; skipped")
}
