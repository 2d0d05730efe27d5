package apply

import (
	"time"

	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/state"
)

// Observer watches a run. See Config.Observer.
//
// Observing a run from outside: metrics, health probes, tests.
//
// Run reports to Config.Observer at three points, each a single call from
// the run loop's goroutine, so an observer sees a consistent sequence
// without locks of its own in the loop:
//
//   - Connected, once a session is replicating: the target is prepared, the
//     slot exists (created if asked for) and START_REPLICATION succeeded.
//     Changes written on the source after that are replicated.
//   - Observe, after every feedback round (Config.FeedbackInterval, and
//     whenever the source asks for a reply), and once more when a session
//     ends cleanly: where the applier is and what it did.
//   - SessionEnded, when a session ends with an error, with whether Run
//     reconnects (transient errors, and the one retry without grouping after
//     a failure inside a group) or stops.
//
// The calls must return quickly: they run between two messages of the
// replication stream. Observe gets a fresh value each time; counters that
// must outlive a session are the observer's business (Observation.Stats).
type Observer interface {
	// Connected is called when a session starts replicating from start,
	// the origin's durable progress on the target.
	Connected(start protocol.LSN)
	// Observe is called after every feedback round with a snapshot.
	Observe(o Observation)
	// SessionEnded is called when a session ends with err; reconnect says
	// whether Run connects again (true) or returns err (false).
	SessionEnded(err error, reconnect bool)
}

// Observation is a snapshot of a running session, taken right after a
// feedback round.
type Observation struct {
	Progress
	// Time is when the snapshot was taken.
	Time time.Time
	// CaughtUp: no source transaction is in flight (received and not yet
	// committed and durable on the target) and everything the source has
	// sent is confirmed to it.
	CaughtUp bool
	// LagBytes is how far the confirmed position is behind the furthest
	// position the source has reported (its walsender's sent position):
	// Received - Flushed, 0 when caught up.
	LagBytes uint64
	// Lag estimates how long ago the oldest source transaction in flight
	// committed on the source: 0 when caught up; otherwise the age of the
	// source commit time of the transaction being applied (or, between
	// transactions, of the last one applied). LagKnown is false when no
	// commit time is known yet (a new session that has not applied or
	// begun a transaction while not caught up); Lag is 0 then.
	Lag      time.Duration
	LagKnown bool
	// Stats are the counters of the session. Each session (each connect)
	// has its own, starting from zero: a different pointer means a new
	// session, and an observer that wants totals over a run adds them up.
	// The fields are atomic; they keep changing after Observe returns.
	Stats *Stats
	// Spill is the state of the spill directory; Spilling is false when
	// streaming is off (no spill directory is open).
	Spill    state.SpillStats
	Spilling bool
	// LastMessageAt is when the session last received a message from the
	// source's walsender, data or keepalive (pg_stat_subscription's
	// last_msg_receipt_time); LastKeepaliveAt when it last received a
	// keepalive. Zero until the first of the session. A data message's
	// time is the run loop's clock reading before it waited for it: when
	// the stream was quiet, up to one FeedbackInterval early.
	LastMessageAt   time.Time
	LastKeepaliveAt time.Time
}

// receipts are a session's LastMessageAt and LastKeepaliveAt.
type receipts struct{ message, keepalive time.Time }

// observeConnected is the hook at the end of session.connect.
func (c *Config) observeConnected(start protocol.LSN) {
	if c.Observer != nil {
		c.Observer.Connected(start)
	}
}

// observeSessionEnded is the hook in Run's retry loop, called with every
// error that ends a session (not with the end of ctx). Whether Run
// reconnects mirrors Run's own decision.
func (c *Config) observeSessionEnded(err error) {
	if c.Observer == nil {
		return
	}
	var te *TxnError
	c.Observer.SessionEnded(err, c.retryUngrouped(err, &te) || IsTransient(err))
}

// observe is the hook in session.feedback: flushed is what was just
// confirmed to the source.
func (s *session) observe(flushed protocol.LSN) {
	if s.cfg.Observer != nil {
		s.cfg.Observer.Observe(s.observation(flushed, time.Now()))
	}
}

// observation builds the snapshot for observe.
func (s *session) observation(flushed protocol.LSN, now time.Time) Observation {
	a := s.applier
	o := Observation{Progress: s.progress(flushed), Time: now, Stats: &a.Stats,
		LastMessageAt: s.heard.message, LastKeepaliveAt: s.heard.keepalive}
	o.Spill, o.Spilling = a.SpillStats()
	// In flight: a transaction begun and not yet committed (grouped ones
	// included), or committed and not yet known durable.
	applying, commitTime := a.Applying()
	inFlight := applying || !s.tracker.AllDurable()
	if !inFlight && o.Received <= o.Flushed {
		o.CaughtUp, o.LagKnown = true, true
		return o
	}
	if o.Received > o.Flushed {
		o.LagBytes = uint64(o.Received - o.Flushed)
	}
	since := o.LastCommitAt
	if applying && commitTime != 0 {
		// The transaction being applied committed on the source after the
		// last applied one: its age is the tighter estimate, and does not
		// jump to the length of a quiet spell when a transaction arrives
		// after one.
		since = commitTime.Time()
	}
	if !since.IsZero() {
		o.Lag, o.LagKnown = max(0, now.Sub(since)), true
	}
	return o
}
