package apply

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/internal/secret"
	"github.com/walapply/walapply/protocol"
)

// waitPoll is how often the slot is read while waiting. The slot moves at
// the applier's feedback rounds (Config.FeedbackInterval), so polling much
// faster than those only costs queries.
const waitPoll = 20 * time.Millisecond

// ErrStopped is returned by Runner.WaitCaughtUp when the applier stopped
// before catching up, wrapping Run's error if there was one.
var ErrStopped = errors.New("apply: the applier stopped")

// WaitCaughtUp waits until the replication slot on the source has confirmed
// the source's current WAL position: reads pg_current_wal_lsn() once, then
// polls pg_replication_slots.confirmed_flush_lsn until it reaches that
// position. When it returns nil, every transaction the source had committed
// when it was called is applied on the target and durable there.
//
// source is an ordinary connection string for the source (a replication
// parameter in it is ignored). A slot that does not exist yet is waited
// for, since an applier may be about to create it; but a slot created after
// the changes were written never sees them, so create it (or Start the
// applier) before writing. It waits until ctx ends; give it a deadline, or
// use Runner.WaitCaughtUp, which also stops waiting when the applier stops.
func WaitCaughtUp(ctx context.Context, source, slot string) error {
	return waitCaughtUp(ctx, source, slot, nil)
}

func waitCaughtUp(ctx context.Context, source, slot string, stopped func() (bool, error)) error {
	pc, err := pgx.ParseConfig(source)
	if err != nil {
		return fmt.Errorf("%w: source connection string: %v", ErrConfig, secret.Error(err, source))
	}
	// WaitCaughtUp runs plain queries: a walsender connection would not
	// take them through the extended protocol.
	delete(pc.RuntimeParams, "replication")
	conn, err := pgx.ConnectConfig(ctx, pc)
	if err != nil {
		return fmt.Errorf("apply: waiting for slot %q: connecting to the source: %w", slot, secret.Error(err, source))
	}
	defer conn.Close(context.WithoutCancel(ctx))

	var text string
	if err := conn.QueryRow(ctx, "SELECT pg_catalog.pg_current_wal_lsn()::text").Scan(&text); err != nil {
		return fmt.Errorf("apply: waiting for slot %q: reading the source's WAL position: %w", slot, err)
	}
	want, err := protocol.ParseLSN(text)
	if err != nil {
		return fmt.Errorf("apply: waiting for slot %q: %w", slot, err)
	}
	state := "does not exist"
	for {
		var confirmed *string
		var slotType string
		err := conn.QueryRow(ctx, `SELECT slot_type, confirmed_flush_lsn::text FROM pg_catalog.pg_replication_slots WHERE slot_name = $1`, slot).Scan(&slotType, &confirmed)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			state = "does not exist"
		case err != nil && ctx.Err() == nil:
			return fmt.Errorf("apply: waiting for slot %q to confirm %s: reading the slot: %w", slot, want, err)
		case err != nil:
		case slotType != "logical":
			return fmt.Errorf("apply: waiting for slot %q: it is a %s slot, not a logical one", slot, slotType)
		case confirmed == nil:
			state = "has no confirmed position yet"
		default:
			got, err := protocol.ParseLSN(*confirmed)
			if err != nil {
				return fmt.Errorf("apply: waiting for slot %q: %w", slot, err)
			}
			if got >= want {
				return nil
			}
			state = "has confirmed " + got.String()
		}
		if stopped != nil {
			if done, runErr := stopped(); done {
				if runErr != nil {
					return fmt.Errorf("%w before slot %q confirmed %s (it %s): %w", ErrStopped, slot, want, state, runErr)
				}
				return fmt.Errorf("%w before slot %q confirmed %s (it %s)", ErrStopped, slot, want, state)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("apply: waiting for slot %q to confirm %s (it %s): %w", slot, want, state, context.Cause(ctx))
		case <-time.After(waitPoll):
		}
	}
}

// Runner is an applier running in the background: Run in a goroutine, with
// what a test needs around it.
//
// Running walapply inside a test (or any program) that needs to know when
// the target has everything the source had at some moment.
//
// "Caught up" is judged on the source, by the slot: its confirmed_flush_lsn
// is what the applier has confirmed as durable on the target (DESIGN.md
// invariant 2), so once it reaches the source's WAL position taken at some
// moment, every transaction committed on the source before that moment is
// committed on the target. Reading the target instead would need to know
// what to look for; reading the applier's own progress would trust the
// thing under test.
type Runner struct {
	cfg    Config
	cancel context.CancelFunc
	done   chan struct{}
	err    error // Run's result, set before done is closed

	connected chan struct{} // closed at the first Connected
	first     chan error    // receives the first session's error, if it fails before connecting
	stats     runnerStats   // what Stats reports (runner_stats.go)
}

// Start runs Run(ctx, cfg) in a goroutine and returns once the applier
// replicates: the target is prepared, the slot exists (with
// cfg.CreateSlot, created by then) and streaming has started, so changes
// written on the source from now on reach the target. If the first attempt
// to connect fails, even with an error Run would retry (the target is not
// up, a wrong port), Start stops the applier and returns that error: in a
// test a quick failure beats a retry loop. Later errors are retried as Run
// does. The applier runs until ctx ends or Stop is called; stop it before
// the clusters go away (defer r.Stop()).
//
// Stats tells where the applier is and what it did, StopContext stops it
// within a bound; cfg.Observer, if set, still sees everything.
func Start(ctx context.Context, cfg Config) (*Runner, error) {
	ctx, cancel := context.WithCancel(ctx)
	r := &Runner{cfg: cfg, cancel: cancel, done: make(chan struct{}), connected: make(chan struct{}), first: make(chan error, 1)}
	cfg.Observer = &runnerObserver{r: r, next: cfg.Observer}
	go func() {
		defer close(r.done)
		r.err = Run(ctx, cfg)
		r.stats.sessionEnded() // also after a clean stop, which ends with an Observe
	}()
	select {
	case <-r.connected:
		return r, nil
	case err := <-r.first:
		_ = r.Stop()
		return nil, fmt.Errorf("apply: starting the applier: %w", asPermanent(err))
	case <-r.done:
		if r.err != nil {
			return nil, fmt.Errorf("apply: starting the applier: %w", r.err)
		}
		return nil, fmt.Errorf("apply: starting the applier: %w", context.Cause(ctx))
	}
}

// WaitCaughtUp is the package's WaitCaughtUp for this applier's source and
// slot, except that it returns an error wrapping ErrStopped (and Run's
// error) as soon as the applier stops, instead of waiting for ctx.
//
// It also waits until no table published later is still being copied: the
// slot may confirm the transactions whose changes to such a table are set
// aside until its copy is done (a restart copies the table again), and
// "caught up" means the target holds what the source had.
func (r *Runner) WaitCaughtUp(ctx context.Context) error {
	stopped := func() (bool, error) {
		select {
		case <-r.done:
			return true, r.err
		default:
			return false, nil
		}
	}
	if err := waitCaughtUp(ctx, r.cfg.Source, r.cfg.Slot, stopped); err != nil {
		return err
	}
	return r.waitCopies(ctx, stopped)
}

// waitCopies waits until walapply.copy_state on the target lists no
// published table of this applier as pending or copied (not caught up).
func (r *Runner) waitCopies(ctx context.Context, stopped func() (bool, error)) error {
	name := r.cfg.Name
	if name == "" {
		name = r.cfg.Slot
	}
	conn, err := pgx.Connect(ctx, r.cfg.Target)
	if err != nil {
		return fmt.Errorf("apply: waiting for the copies of applier %q: connecting to the target: %w", name, secret.Error(err, r.cfg.Target))
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for {
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM walapply.copy_state
			WHERE applier = $1 AND published AND status IN ('pending', 'copied')`, name).Scan(&n)
		if err != nil {
			return fmt.Errorf("apply: waiting for the copies of applier %q: reading walapply.copy_state: %w", name, err)
		}
		if n == 0 {
			return nil
		}
		if done, runErr := stopped(); done {
			if runErr != nil {
				return fmt.Errorf("%w while %d table(s) were still being copied: %w", ErrStopped, n, runErr)
			}
			return fmt.Errorf("%w while %d table(s) were still being copied", ErrStopped, n)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("apply: waiting for the copies of applier %q: %d table(s) still being copied: %w", name, n, context.Cause(ctx))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Stop stops the applier at a clean point (as when Run's context ends),
// waits for it and returns Run's error: nil after a clean stop, the error
// if it had already stopped with one. It may be called more than once.
func (r *Runner) Stop() error {
	return r.StopContext(context.Background())
}

// Done is closed when the applier has stopped; Err then returns Run's
// error.
func (r *Runner) Done() <-chan struct{} { return r.done }

// Err returns Run's error once Done is closed, nil before.
func (r *Runner) Err() error {
	select {
	case <-r.done:
		return r.err
	default:
		return nil
	}
}

// runnerObserver tells Start about the first session.
type runnerObserver struct {
	r    *Runner
	next Observer
	seen bool // a session connected or failed: Start has its answer
}

func (o *runnerObserver) Connected(start protocol.LSN) {
	o.r.stats.connected()
	if !o.seen {
		o.seen = true
		close(o.r.connected)
	}
	if o.next != nil {
		o.next.Connected(start)
	}
}

func (o *runnerObserver) Observe(obs Observation) {
	o.r.stats.observe(obs)
	if o.next != nil {
		o.next.Observe(obs)
	}
}

func (o *runnerObserver) SessionEnded(err error, reconnect bool) {
	o.r.stats.sessionEnded()
	if !o.seen {
		o.seen = true
		o.r.first <- err
	}
	if o.next != nil {
		o.next.SessionEnded(err, reconnect)
	}
}
