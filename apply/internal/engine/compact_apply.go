package engine

import (
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/protocol"
)

// compactable reports whether a relation's changes may be compacted (see
// compactor).
func compactable(e *relmap.Entry, p ConflictPolicies) bool {
	if e.Compact == 0 {
		e.Compact = 2
		if isCompactable(e, p) {
			e.Compact = 1
		}
	}
	return e.Compact == 1
}

func isCompactable(e *relmap.Entry, p ConflictPolicies) bool {
	// Upserts and inserts of missing rows are done row by row.
	if p[ConflictInsertExists] != PolicyError || p[ConflictUpdateMissing] == PolicyApply {
		return false
	}
	if e.Rel.ReplicaIdentity == protocol.ReplicaIdentityFull || len(e.Key) == 0 || !e.Target.KeyOnlyUnique {
		return false
	}
	// The target's one unique index must be the identity's key.
	if len(e.Target.UniqueCols) != len(e.Key) {
		return false
	}
	for _, i := range e.Key {
		if !e.Target.UniqueCols[e.Rel.Columns[i].Name] {
			return false
		}
	}
	return true
}
