package apply

import (
	"context"
	"fmt"
	"maps"
	"sync"
)

// RunnerStats is a snapshot of a Runner (Runner.Stats): where the applier
// is and what it did since Start, without an Observer of one's own.
//
// The positions (Received, Applied, Flushed) and CaughtUp and LagBytes are
// those of the last feedback round (Config.FeedbackInterval), as an
// Observer sees them; Flushed is the position confirmed to the source. The
// counters are live and add up every session since Start (a reconnect
// starts a session's own counters from zero; Observation.Stats).
type RunnerStats struct {
	Progress // TxnsApplied, Commits and Rows are totals since Start
	CaughtUp bool
	LagBytes uint64
	// Sessions is how many sessions have connected since Start; a
	// reconnect after a transient error makes one more.
	Sessions int
	// The counters of Stats, totals since Start.
	TxnsSkipped, Inserts, Updates, Deletes, Truncates, CopiedRows, MissingRows int64
	// Conflicts counts conflicts by kind (insert_exists, update_missing,
	// ...); kinds that never occurred are absent.
	Conflicts map[string]int64
}

// runnerStats keeps what Runner.Stats reports; the run loop's goroutine
// writes it through runnerObserver, Stats reads it from any goroutine.
type runnerStats struct {
	mu       sync.Mutex
	last     Observation
	current  *Stats // the session's live counters, nil before the first Observe
	done     statTotals
	sessions int
}

// statTotals is what the ended sessions counted.
type statTotals struct {
	txns, skipped, commits, inserts, updates, deletes, truncates, copied, missing int64
	conflicts                                                                     map[string]int64
}

func (t *statTotals) add(s *Stats) {
	t.txns += s.TxnsApplied.Load()
	t.skipped += s.TxnsSkipped.Load()
	t.commits += s.Commits.Load()
	t.inserts += s.Inserts.Load()
	t.updates += s.Updates.Load()
	t.deletes += s.Deletes.Load()
	t.truncates += s.Truncates.Load()
	t.copied += s.CopiedRows.Load()
	t.missing += s.MissingRows.Load()
	for k, n := range s.Conflicts.Snapshot() {
		if t.conflicts == nil {
			t.conflicts = map[string]int64{}
		}
		t.conflicts[k] += n
	}
}

func (r *runnerStats) connected() {
	r.mu.Lock()
	r.sessions++
	r.last.Connected = true
	r.mu.Unlock()
}

func (r *runnerStats) observe(o Observation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if o.Stats != r.current && r.current != nil {
		r.done.add(r.current) // a new session: the last one's counters are final
	}
	r.current, r.last = o.Stats, o
}

func (r *runnerStats) sessionEnded() {
	r.mu.Lock()
	r.last.Connected, r.last.InTransaction, r.last.CaughtUp = false, false, false
	r.mu.Unlock()
}

// Stats returns a snapshot of the applier's progress and counters since
// Start. It may be called at any time from any goroutine, also after the
// applier stopped.
func (r *Runner) Stats() RunnerStats {
	s := &r.stats
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.done
	t.conflicts = maps.Clone(s.done.conflicts)
	if s.current != nil {
		t.add(s.current)
	}
	out := RunnerStats{Progress: s.last.Progress, CaughtUp: s.last.CaughtUp, LagBytes: s.last.LagBytes, Sessions: s.sessions,
		TxnsSkipped: t.skipped, Inserts: t.inserts, Updates: t.updates, Deletes: t.deletes, Truncates: t.truncates,
		CopiedRows: t.copied, MissingRows: t.missing, Conflicts: t.conflicts}
	out.TxnsApplied, out.Commits, out.Rows = t.txns, t.commits, t.inserts+t.updates+t.deletes
	return out
}

// StopContext is Stop bounded by ctx: it asks the applier to stop at a
// clean point and waits for it until ctx ends. If ctx ends first it
// returns an error wrapping ctx's cause; the applier goes on stopping in
// the background (Done is closed when it has), and a later Stop or
// StopContext waits again.
func (r *Runner) StopContext(ctx context.Context) error {
	r.cancel()
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return fmt.Errorf("apply: the applier has not stopped yet (it is finishing the statement or round in progress): %w", context.Cause(ctx))
	}
}
