package apply

import (
	"context"
	"fmt"
	"time"

	"github.com/walapply/walapply/apply/internal/engine"
	"github.com/walapply/walapply/apply/internal/initcopy"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/state"
)

// loop receives, applies and confirms until ctx ends (nil) or an error.
//
// Target work runs under a context that ctx's cancellation does not reach:
// a signal lets the statement in flight finish, then the loop stops between
// messages and close() rolls back whatever transaction is still open. That
// is the clean point: nothing half-applied, everything applied confirmed.
func (s *session) loop(ctx context.Context) error {
	cfg := s.cfg
	keepCtx, stopKeeper := context.WithCancel(ctx)
	defer stopKeeper()
	go s.keeper.run(keepCtx)
	applyCtx := context.WithoutCancel(ctx)
	nextFeedback := time.Now().Add(cfg.FeedbackInterval)
	lastProgress := time.Now()
	var lastTxns, lastRows int64
	var ev protocol.StreamEvent
	for {
		if ctx.Err() != nil {
			// A clean stop: commit what is complete, confirm it (close()).
			if err := s.commitAndSettle(applyCtx); err != nil {
				return err
			}
			return nil
		}
		if err := s.catchUpReady(applyCtx); err != nil { // refresh_sync.go
			return err
		}
		if err := s.pollUntilNow(applyCtx); err != nil { // until.go
			return err
		}
		if s.untilReached() {
			return s.stopAtUntil(applyCtx)
		}
		now := time.Now()
		if !now.Before(nextFeedback) {
			if err := s.feedback(applyCtx); err != nil {
				return err
			}
			nextFeedback = now.Add(cfg.FeedbackInterval)
			if cfg.ProgressInterval > 0 && now.Sub(lastProgress) >= cfg.ProgressInterval {
				lastTxns, lastRows = s.logProgress(now.Sub(lastProgress), lastTxns, lastRows)
				lastProgress = now
			}
		}
		s.applier.SetClock(now)
		err := s.keeper.use(func(rs *protocol.ReplStream) error {
			return rs.ReceiveBefore(ctx, receiveDeadline(now, nextFeedback, s.applier.Pending()), &ev)
		})
		if err != nil {
			if ctx.Err() != nil {
				continue // flushes the group, then stops
			}
			if protocol.IsTimeout(err) {
				if err := s.idle(applyCtx); err != nil {
					return err
				}
				continue
			}
			// The position names where the stream broke, also when the
			// damage left nothing of the message's own header to read.
			err = fmt.Errorf("receiving from the source after source LSN %s: %w", s.serverWALEnd, err)
			return s.publicationLost(applyCtx, err) // session_stream.go
		}
		switch ev.Kind {
		case protocol.EventXLogData:
			s.heard.message = now
			if err := s.handle(applyCtx, &ev); err != nil {
				return err
			}
		case protocol.EventKeepalive:
			s.heard.keepalive = time.Now()
			s.heard.message = s.heard.keepalive
			s.serverWALEnd = max(s.serverWALEnd, ev.ServerWALEnd)
			s.tracker.Received(ev.ServerWALEnd)
			if ev.ReplyRequested {
				if err := s.feedback(applyCtx); err != nil {
					return err
				}
			}
		}
	}
}

// receiveDeadline is when the loop stops waiting for the next message: at
// the next feedback, and while work is pending (the applier's Pending) as soon as the
// stream has nothing more at hand, after a millisecond; the group then
// commits (or, inside a source transaction, nothing happens). A group that
// keeps receiving ends by age instead (endGrouped). The deadline is rounded
// up to the next whole millisecond so that it changes about once a
// millisecond rather than with every message (ReceiveBefore touches the
// socket only when it changes), and it is never in the past: a deadline
// that has passed would time out every receive that needs the socket, and
// the loop would spin without reading.
func receiveDeadline(now, nextFeedback time.Time, pending bool) time.Time {
	deadline := nextFeedback
	if d := now.Add(time.Millisecond); pending && d.Before(deadline) {
		deadline = d
	}
	return deadline.Truncate(time.Millisecond).Add(time.Millisecond)
}

// handle decodes and applies one XLogData message.
func (s *session) handle(ctx context.Context, ev *protocol.StreamEvent) error {
	msg, err := s.decoder.Decode(ev.Data)
	if err != nil {
		return &PermanentError{Err: fmt.Errorf("decoding the replication message at source LSN %s: %w; nothing of the transaction was applied or confirmed", ev.WALStart, err)}
	}
	if s.pastUntil(msg) { // until.go: not applied; the loop stops
		s.untilPassed = true
		return nil
	}
	s.applier.SetRaw(ev.Data) // spilled as received (internal/engine/stream.go)
	e, o, err := s.applier.Handle(ctx, msg)
	if err != nil {
		return err
	}
	// For logical replication the XLogData start is the position of the
	// decoded record (a Commit's is the end of its transaction).
	s.serverWALEnd = max(s.serverWALEnd, ev.ServerWALEnd, ev.WALStart)
	s.origins.Observe(e, msg)
	s.track(o)
	s.tracker.Received(ev.WALStart)
	return nil
}

// track keeps the FlushTracker balanced with what the applier did. One
// message can end several things at once (a group flushed ahead of a
// transaction that is then skipped), so every flag counts.
func (s *session) track(o engine.Outcome) {
	if o.Began {
		s.tracker.BeginTxn()
	}
	if o.Applied {
		for i := max(o.Count, 1); i > 0; i-- {
			s.tracker.Applied(o.End)
		}
		s.progressed = true
	}
	if o.Skipped {
		s.tracker.SkippedTxn()
	}
	if o.Ended {
		s.tracker.EndTxn()
	}
}

// commitAndSettle commits the applier's open group, if any, and settles the
// batch in flight.
func (s *session) commitAndSettle(ctx context.Context) error {
	return s.tracked(ctx, s.applier.CommitAndSettle)
}

// idle is commitAndSettle's first step, for a stream that is quiet for now
// (applier.Idle).
func (s *session) idle(ctx context.Context) error {
	return s.tracked(ctx, s.applier.Idle)
}

// tracked runs one of the applier's steps and passes its outcome to the
// FlushTracker.
func (s *session) tracked(ctx context.Context, step func(context.Context) (engine.Outcome, error)) error {
	o, err := step(ctx)
	if err != nil {
		return err
	}
	s.track(o)
	return nil
}

// feedback learns what is durable on the target and confirms it to the
// source (DESIGN.md invariant 2).
func (s *session) feedback(ctx context.Context) error {
	if s.tracker.NeedsDurableCheck() {
		lsn, _, err := state.OriginProgress(ctx, s.control, s.origin, true)
		if err != nil {
			return fmt.Errorf("reading the durable progress of origin %q on the target: %w", s.origin, err)
		}
		s.tracker.Durable(lsn)
	}
	w, f, a, err := s.confirm(ctx) // identity.go: records f first when it passes the origin
	if err != nil {
		return err
	}
	if err := s.keeper.sendStatus(ctx, w, f, a, s.untilWaiting()); err != nil {
		return fmt.Errorf("sending feedback to the source: %w", err)
	}
	if s.cfg.OnProgress != nil {
		s.cfg.OnProgress(s.progress(f))
	}
	s.observe(f)
	s.checkLeftovers(ctx) // session_twophase.go
	return nil
}

func (s *session) progress(flushed protocol.LSN) Progress {
	applied, at := s.applier.Applied()
	st := &s.applier.Stats
	p := Progress{
		Received:      max(s.serverWALEnd, applied),
		Applied:       applied,
		Flushed:       flushed,
		Connected:     true,
		InTransaction: s.applier.InTransaction(),
		TxnsApplied:   st.TxnsApplied.Load(),
		Commits:       st.Commits.Load(),
		Rows:          st.Inserts.Load() + st.Updates.Load() + st.Deletes.Load(),
		LastOrigin:    s.origins.Last(),
	}
	if at != 0 {
		p.LastCommitAt = at.Time()
	}
	return p
}

// logProgress writes the periodic progress line and returns the counters
// it was computed from.
func (s *session) logProgress(elapsed time.Duration, lastTxns, lastRows int64) (int64, int64) {
	_, f, _ := s.tracker.Feedback()
	p := s.progress(f)
	secs := elapsed.Seconds()
	lagBytes := uint64(0)
	if p.Received > p.Applied && !s.tracker.AllDurable() {
		lagBytes = uint64(p.Received - p.Applied)
	}
	lag := time.Duration(0)
	if !p.LastCommitAt.IsZero() && !s.tracker.AllDurable() {
		lag = time.Since(p.LastCommitAt)
	}
	s.cfg.Logger.Info().
		Stringer("received_lsn", p.Received).Stringer("applied_lsn", p.Applied).Stringer("confirmed_lsn", p.Flushed).
		Uint64("lag_bytes", lagBytes).Float64("lag_seconds", initcopy.Round1(lag.Seconds())).
		Float64("txns_per_sec", initcopy.Round1(float64(p.TxnsApplied-lastTxns)/secs)).
		Float64("rows_per_sec", initcopy.Round1(float64(p.Rows-lastRows)/secs)).
		Int64("txns_applied", p.TxnsApplied).Int64("rows_applied", p.Rows).
		Msg("progress")
	return p.TxnsApplied, p.Rows
}

// seconds is a duration for a log field named *_seconds (the log's rule
// for durations: cmd/walapply/logging.go), to the millisecond.
func seconds(d time.Duration) float64 { return engine.Seconds(d) }
