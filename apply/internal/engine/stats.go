package engine

import (
	"maps"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Stats counts what the applier did. Fields are updated atomically so that
// metrics and progress callbacks may read them from other goroutines.
type Stats struct {
	TxnsApplied atomic.Int64
	TxnsSkipped atomic.Int64 // already applied before a restart
	Commits     atomic.Int64 // target transactions committed (group commit folds several source transactions into one)
	Inserts     atomic.Int64
	CopiedRows  atomic.Int64 // of Inserts, sent with COPY (stream_copy.go, internal/pipeline/copy.go)
	Updates     atomic.Int64
	Deletes     atomic.Int64
	Truncates   atomic.Int64
	MissingRows atomic.Int64 // UPDATE/DELETE that found no row (logged and skipped)
	// ParallelApplied counts streamed transactions applied as they
	// streamed, ParallelFallbacks those that fell back to the spill path
	// (stream_parallel.go).
	ParallelApplied   atomic.Int64
	ParallelFallbacks atomic.Int64
	// Conflicts counts conflicts by kind (ConflictStats).
	Conflicts ConflictStats
}

// ConflictStats counts conflicts by kind, named as PostgreSQL 18's
// subscriber names them in its log and in pg_stat_subscription_stats
// (insert_exists, update_missing, delete_missing, ...). The zero value is
// ready to use; it is safe for concurrent use.
type ConflictStats struct {
	mu sync.Mutex
	n  map[string]int64
}

// Add counts one conflict of kind.
func (c *ConflictStats) Add(kind string) {
	c.mu.Lock()
	if c.n == nil {
		c.n = map[string]int64{}
	}
	c.n[kind]++
	c.mu.Unlock()
}

// ConflictKinds are the kinds ConflictStats counts: the four kinds of
// --on-conflict, and skipped_by_user for a transaction skipped with
// --skip-lsn (PostgreSQL counts none; walapply records it with the
// conflicts).
func ConflictKinds() []string {
	return []string{ConflictInsertExists, ConflictUpdateExists, ConflictUpdateMissing, ConflictDeleteMissing, SkippedByUser}
}

// Snapshot returns the counts so far by kind (kinds never seen are absent).
func (c *ConflictStats) Snapshot() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

// Get returns the count of one kind.
func (c *ConflictStats) Get(kind string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[kind]
}

// moveStats adds the counters of a change to st, and zeroes them in from.
func moveStats(from, st *Stats) {
	st.Inserts.Add(from.Inserts.Swap(0))
	st.CopiedRows.Add(from.CopiedRows.Swap(0))
	st.Updates.Add(from.Updates.Swap(0))
	st.Deletes.Add(from.Deletes.Swap(0))
	st.Truncates.Add(from.Truncates.Swap(0))
	st.MissingRows.Add(from.MissingRows.Swap(0))
	from.Conflicts.mu.Lock()
	n := from.Conflicts.n
	from.Conflicts.n = nil
	from.Conflicts.mu.Unlock()
	for kind, k := range n {
		st.Conflicts.mu.Lock()
		if st.Conflicts.n == nil {
			st.Conflicts.n = map[string]int64{}
		}
		st.Conflicts.n[kind] += k
		st.Conflicts.mu.Unlock()
	}
}

// Seconds is d in seconds, to the millisecond: how log lines give
// durations.
func Seconds(d time.Duration) float64 { return math.Round(d.Seconds()*1000) / 1000 }
