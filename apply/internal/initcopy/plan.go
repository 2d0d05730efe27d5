package initcopy

import (
	"context"
	"fmt"

	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/protocol"
)

// Record is walapply.copies' row for an applier.
type Record struct {
	Exists   bool
	Slot     string
	Point    protocol.LSN // InvalidLSN while the slot was being created
	Finished bool
	// SchemaPhase is how far --schema got (apply/schema.go): "",
	// "pre-data" or "post-data".
	SchemaPhase string
}

// Action is what a start does about the initial copy.
type Action int

const (
	Nothing  Action = iota // no copy asked for, or it is finished: stream
	Fresh                  // create the slot with a snapshot, copy every table
	Recreate               // the slot's creation was interrupted: drop the slot if it exists, then as Fresh
	Resume                 // copy the tables not done, in a new snapshot
)

func (a Action) String() string {
	return [...]string{"nothing", "fresh", "recreate", "resume"}[a]
}

// Facts is what Decide decides from.
type Facts struct {
	Asked     bool // Config.Copy
	Applier   string
	Slot      string // Config.Slot
	Rec       Record
	SlotFound bool
	SlotFlush protocol.LSN // the slot's confirmed_flush_lsn
	Origin    protocol.LSN // the origin's progress on the target
}

// Decide is the pure decision of what a start does about the initial
// copy. The slot's facts matter only when the copy is asked for and not
// finished. Every error it returns is one that retrying cannot fix: it
// says what the operator must do.
func Decide(f Facts) (Action, error) {
	if f.Rec.Exists && f.Rec.Finished {
		return Nothing, nil
	}
	if !f.Asked {
		if f.Rec.Exists {
			return Nothing, fmt.Errorf("the initial copy of applier %q is unfinished: run again with --copy to finish it (only the tables not yet copied are copied)", f.Applier)
		}
		return Nothing, nil
	}
	if !f.Rec.Exists {
		if f.Origin != protocol.InvalidLSN {
			return Nothing, fmt.Errorf("applier %q already replicates (its origin is at %s): --copy starts a new applier; run without --copy to continue, or use a new --name and --slot for a new copy", f.Applier, f.Origin)
		}
		if f.SlotFound {
			return Nothing, fmt.Errorf("replication slot %q already exists on the source: --copy creates the slot itself, so that the copy's snapshot and the slot's start match; drop it (SELECT pg_drop_replication_slot('%s') on the source) or choose another --slot", f.Slot, f.Slot)
		}
		return Fresh, nil
	}
	if f.Rec.Slot != f.Slot {
		return Nothing, fmt.Errorf("the unfinished initial copy of applier %q uses replication slot %q, not %q: run with --slot %s", f.Applier, f.Rec.Slot, f.Slot, f.Rec.Slot)
	}
	if f.Rec.Point == protocol.InvalidLSN {
		return Recreate, nil
	}
	if !f.SlotFound {
		return Nothing, fmt.Errorf("replication slot %q, created by the unfinished initial copy of applier %q at %s, no longer exists on the source, and the tables already copied cannot be brought up to date without it; "+
			"to start over, TRUNCATE the published tables on the target and DELETE FROM walapply.copies WHERE applier = '%s', then run with --copy again", f.Slot, f.Applier, f.Rec.Point, f.Applier)
	}
	if f.SlotFlush > f.Rec.Point {
		return Nothing, fmt.Errorf("replication slot %q was consumed up to %s, past the point %s of applier %q's unfinished initial copy: the changes in between are lost to it; "+
			"to start over, TRUNCATE the published tables on the target, DELETE FROM walapply.copies WHERE applier = '%s' and drop the slot, then run with --copy again", f.Slot, f.SlotFlush, f.Rec.Point, f.Applier, f.Applier)
	}
	return Resume, nil
}

// ReadRecord reads walapply.copies' row for applier.
func ReadRecord(ctx context.Context, q relmap.Querier, applier string) (Record, error) {
	rows, err := q.Query(ctx, `SELECT slot_name, coalesce(consistent_point::text, ''), finished_at IS NOT NULL, coalesce(schema_phase, '') FROM walapply.copies WHERE applier = $1`, applier)
	if err != nil {
		return Record{}, fmt.Errorf("reading walapply.copies on the target: %w", err)
	}
	defer rows.Close()
	var rec Record
	for rows.Next() {
		var point string
		if err := rows.Scan(&rec.Slot, &point, &rec.Finished, &rec.SchemaPhase); err != nil {
			return Record{}, fmt.Errorf("reading walapply.copies on the target: %w", err)
		}
		rec.Exists = true
		if point != "" {
			if rec.Point, err = protocol.ParseLSN(point); err != nil {
				return Record{}, fmt.Errorf("walapply.copies.consistent_point: %w", err)
			}
		}
	}
	return rec, rows.Err()
}
