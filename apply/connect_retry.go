package apply

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// errConnectDeadline is the cause with which an attempt to connect is cut
// off at Config.ConnectTimeout.
var errConnectDeadline = errors.New("apply: connect timeout reached")

// firstConnect is Run's patience with the first connection. Until both
// servers have been reached once (the target's connections and then the
// source's replication connection: Config.reached), a failure to connect
// is most likely a configuration that retrying cannot fix (a wrong host
// or port, a server not started, a firewall), so every retry is logged
// with the time spent and the next attempt, and with Config.ConnectTimeout
// Run gives up after it with a PermanentError. Once reached, transient
// errors are retried for as long as it takes, as before.
type firstConnect struct {
	cfg      *Config
	start    time.Time
	attempts int
	last     error // the last failure other than the deadline's cut-off
}

func newFirstConnect(cfg *Config) *firstConnect {
	cfg.reached = new(atomic.Bool)
	return &firstConnect{cfg: cfg, start: time.Now()}
}

// sessionContext is the context of one session: ctx, cut off at the
// deadline while the servers have not been reached. release frees it.
func (f *firstConnect) sessionContext(ctx context.Context) (context.Context, func()) {
	if f.cfg.ConnectTimeout <= 0 || f.cfg.reached.Load() {
		return ctx, func() {}
	}
	f.attempts++
	sctx, cancel := context.WithCancelCause(ctx)
	reached := f.cfg.reached
	timer := time.AfterFunc(time.Until(f.start.Add(f.cfg.ConnectTimeout)), func() {
		if !reached.Load() {
			cancel(errConnectDeadline)
		}
	})
	return sctx, func() { timer.Stop(); cancel(nil) }
}

// failed looks at the error that ended a session. Before the servers were
// reached it returns the PermanentError that ends Run when the deadline
// has passed, nil otherwise.
func (f *firstConnect) failed(sctx context.Context, err error) error {
	if f.cfg.reached.Load() {
		return nil
	}
	if context.Cause(sctx) != errConnectDeadline {
		f.last = err
		if f.cfg.ConnectTimeout <= 0 || time.Since(f.start) < f.cfg.ConnectTimeout {
			return nil
		}
	}
	if f.last == nil {
		f.last = err
	}
	return &PermanentError{Err: fmt.Errorf("no connection within the connect timeout (--connect-timeout %s, %d attempts over %s; "+
		"once the cause is fixed, a longer one or 0 retries for longer or for ever); the last attempt: %w",
		f.cfg.ConnectTimeout, max(f.attempts, 1), time.Since(f.start).Round(time.Millisecond), f.last)}
}

// retrying logs a retry before the servers were reached, with the time
// spent, the next attempt and the deadline, and returns the wait, shortened
// to the deadline; ok is false once the servers were reached (Run logs its
// usual line then).
func (f *firstConnect) retrying(err error, wait time.Duration) (time.Duration, bool) {
	if f.cfg.reached.Load() {
		return wait, false
	}
	elapsed := time.Since(f.start)
	ev := f.cfg.Logger.Warn().Err(err).Float64("elapsed_seconds", seconds(elapsed))
	if t := f.cfg.ConnectTimeout; t > 0 {
		wait = min(wait, max(t-elapsed, 0))
		ev = ev.Float64("connect_timeout_seconds", seconds(t)).Float64("gives_up_in_seconds", seconds(max(t-elapsed, 0)))
	}
	ev.Float64("retry_in_seconds", seconds(wait)).
		Msg("transient error; cannot connect yet, retrying (--connect-timeout bounds this)")
	return wait, true
}

// markReached records that both servers answered once (in session.connect).
func (c *Config) markReached() {
	if c.reached != nil {
		c.reached.Store(true)
	}
}
