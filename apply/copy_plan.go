package apply

import (
	"context"
	"fmt"

	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/protocol"
)

// copyRecord is walapply.copies' row for an applier.
type copyRecord struct {
	exists   bool
	slot     string
	point    protocol.LSN // InvalidLSN while the slot was being created
	finished bool
	// schemaPhase is how far --schema got (schema.go): "", "pre-data"
	// or "post-data".
	schemaPhase string
}

// copyAction is what a start does about the initial copy.
type copyAction int

const (
	copyNothing  copyAction = iota // no copy asked for, or it is finished: stream
	copyFresh                      // create the slot with a snapshot, copy every table
	copyRecreate                   // the slot's creation was interrupted: drop the slot if it exists, then as copyFresh
	copyResume                     // copy the tables not done, in a new snapshot
)

func (a copyAction) String() string {
	return [...]string{"nothing", "fresh", "recreate", "resume"}[a]
}

// copyFacts is what planCopy decides from.
type copyFacts struct {
	asked     bool // Config.Copy
	applier   string
	slot      string // Config.Slot
	rec       copyRecord
	slotFound bool
	slotFlush protocol.LSN // the slot's confirmed_flush_lsn
	origin    protocol.LSN // the origin's progress on the target
}

// planCopy is the pure decision of what a start does about the initial
// copy. The slot's facts matter only when the copy is asked for and not
// finished.
func planCopy(f copyFacts) (copyAction, error) {
	if f.rec.exists && f.rec.finished {
		return copyNothing, nil
	}
	if !f.asked {
		if f.rec.exists {
			return copyNothing, &PermanentError{fmt.Errorf("the initial copy of applier %q is unfinished: run again with --copy to finish it (only the tables not yet copied are copied)", f.applier)}
		}
		return copyNothing, nil
	}
	if !f.rec.exists {
		if f.origin != protocol.InvalidLSN {
			return copyNothing, &PermanentError{fmt.Errorf("applier %q already replicates (its origin is at %s): --copy starts a new applier; run without --copy to continue, or use a new --name and --slot for a new copy", f.applier, f.origin)}
		}
		if f.slotFound {
			return copyNothing, &PermanentError{fmt.Errorf("replication slot %q already exists on the source: --copy creates the slot itself, so that the copy's snapshot and the slot's start match; drop it (SELECT pg_drop_replication_slot('%s') on the source) or choose another --slot", f.slot, f.slot)}
		}
		return copyFresh, nil
	}
	if f.rec.slot != f.slot {
		return copyNothing, &PermanentError{fmt.Errorf("the unfinished initial copy of applier %q uses replication slot %q, not %q: run with --slot %s", f.applier, f.rec.slot, f.slot, f.rec.slot)}
	}
	if f.rec.point == protocol.InvalidLSN {
		return copyRecreate, nil
	}
	if !f.slotFound {
		return copyNothing, &PermanentError{fmt.Errorf("replication slot %q, created by the unfinished initial copy of applier %q at %s, no longer exists on the source, and the tables already copied cannot be brought up to date without it; "+
			"to start over, TRUNCATE the published tables on the target and DELETE FROM walapply.copies WHERE applier = '%s', then run with --copy again", f.slot, f.applier, f.rec.point, f.applier)}
	}
	if f.slotFlush > f.rec.point {
		return copyNothing, &PermanentError{fmt.Errorf("replication slot %q was consumed up to %s, past the point %s of applier %q's unfinished initial copy: the changes in between are lost to it; "+
			"to start over, TRUNCATE the published tables on the target, DELETE FROM walapply.copies WHERE applier = '%s' and drop the slot, then run with --copy again", f.slot, f.slotFlush, f.rec.point, f.applier, f.applier)}
	}
	return copyResume, nil
}

// readCopyRecord reads walapply.copies' row for applier.
func readCopyRecord(ctx context.Context, q relmap.Querier, applier string) (copyRecord, error) {
	rows, err := q.Query(ctx, `SELECT slot_name, coalesce(consistent_point::text, ''), finished_at IS NOT NULL, coalesce(schema_phase, '') FROM walapply.copies WHERE applier = $1`, applier)
	if err != nil {
		return copyRecord{}, fmt.Errorf("reading walapply.copies on the target: %w", err)
	}
	defer rows.Close()
	var rec copyRecord
	for rows.Next() {
		var point string
		if err := rows.Scan(&rec.slot, &point, &rec.finished, &rec.schemaPhase); err != nil {
			return copyRecord{}, fmt.Errorf("reading walapply.copies on the target: %w", err)
		}
		rec.exists = true
		if point != "" {
			if rec.point, err = protocol.ParseLSN(point); err != nil {
				return copyRecord{}, fmt.Errorf("walapply.copies.consistent_point: %w", err)
			}
		}
	}
	return rec, rows.Err()
}
