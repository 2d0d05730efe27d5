package apply

import (
	"time"

	"github.com/walapply/walapply/apply/internal/initcopy"
)

// CopyProgress is where the initial copy stands (Config.OnCopyProgress).
type CopyProgress struct {
	TablesTotal int
	// TablesDone includes the tables an earlier, interrupted attempt
	// copied.
	TablesDone int
	// Rows and Bytes (in the COPY format of each table: binary or text,
	// internal/initcopy/format.go) copied by this attempt so far, counted as they
	// stream, committed or not.
	Rows, Bytes int64
	// EstimatedRows is the source's estimate (pg_class.reltuples) of the
	// rows this attempt copies; 0 when the source has none (tables never
	// vacuumed or analyzed).
	EstimatedRows int64
	Elapsed       time.Duration
	RowsPerSec    float64
	BytesPerSec   float64
	// ETA is the estimated time left, from the rate so far and
	// EstimatedRows; 0 when unknown.
	ETA time.Duration
	// Table and TableRows name the table whose copy just committed, in
	// the call made for it; empty in periodic calls.
	Table     string
	TableRows int64
	// RangesTotal and RangesDone count the ranges of the tables this
	// attempt copies in ranges (internal/initcopy/ranges.go), as they are planned.
	RangesTotal, RangesDone int
	// Done: every table is copied, and streaming starts from the slot's
	// consistent point.
	Done bool
	// Started is when this attempt began: a new value is a new attempt
	// (a restarted copy, or a copy of tables published later), whose
	// Rows and Bytes start from 0 again.
	Started time.Time
	// Copying are the tables being copied at this moment, by name, with
	// what has streamed into each so far (uncommitted until the table's
	// copy commits).
	Copying []TableCopyProgress
}

// TableCopyProgress is one table being copied.
type TableCopyProgress struct {
	Table       string // schema.table, unquoted as in log fields
	Rows, Bytes int64
}

// ObserveCopy, when Config.Observer has it, is called with the same
// snapshots as Config.OnCopyProgress: about every second during an
// initial copy (or a copy of tables published later), after each table,
// and once when the copy is complete. It must return quickly.
type CopyObserver interface {
	ObserveCopy(CopyProgress)
}

// newCopyProgress counts a copy's progress (initcopy.Progress) for the
// log (every Config.ProgressInterval) and for Config.OnCopyProgress and a
// CopyObserver, which get it as a CopyProgress.
func newCopyProgress(cfg *Config, total, doneBefore int, todo []*initcopy.Table) *initcopy.Progress {
	var tell func(initcopy.Snapshot)
	if o, _ := cfg.Observer.(CopyObserver); cfg.OnCopyProgress != nil || o != nil {
		tell = func(s initcopy.Snapshot) {
			p := copyProgressOf(s)
			if cfg.OnCopyProgress != nil {
				cfg.OnCopyProgress(p)
			}
			if o != nil {
				o.ObserveCopy(p)
			}
		}
	}
	return initcopy.NewProgress(total, doneBefore, todo, tell, cfg.Logger, cfg.ProgressInterval)
}

// copyProgressOf is the package's snapshot as the public CopyProgress.
func copyProgressOf(s initcopy.Snapshot) CopyProgress {
	p := CopyProgress{TablesTotal: s.TablesTotal, TablesDone: s.TablesDone, Rows: s.Rows, Bytes: s.Bytes,
		EstimatedRows: s.EstimatedRows, Elapsed: s.Elapsed, RowsPerSec: s.RowsPerSec, BytesPerSec: s.BytesPerSec,
		ETA: s.ETA, Table: s.Table, TableRows: s.TableRows, RangesTotal: s.RangesTotal, RangesDone: s.RangesDone,
		Done: s.Done, Started: s.Started}
	for _, c := range s.Copying {
		p.Copying = append(p.Copying, TableCopyProgress{Table: c.Table, Rows: c.Rows, Bytes: c.Bytes})
	}
	return p
}
