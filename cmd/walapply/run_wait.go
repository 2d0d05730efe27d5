package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/walapply/walapply/apply"
)

// --on-permanent-error: what walapply run does when the applier stops
// with an error that retrying on its own does not fix (a missing target
// table, a duplicate key under insert_exists=error, ...).
//
// exit (the default) ends the process with status 1 after the error's
// fatal log record: what a script, systemd or a one-off run wants, and
// what walapply always did. But a process that exits cannot be scraped:
// under Kubernetes the pod restarts into the same error, CrashLoopBackOff
// hides it, and an alert on walapply_errors_total never sees the
// increase. wait keeps the process up, not ready (/readyz 503 naming the
// error), serving the error in its metrics (walapply_last_error_*), and
// runs the applier again after --error-retry or at once on
// SIGHUP, like PostgreSQL's subscription worker retrying after an
// error (or, with a long interval, like disable_on_error until the
// operator acts). docs/KUBERNETES.md recommends wait.
const (
	onPermanentExit = "exit"
	onPermanentWait = "wait"
)

// waitingObserver is the part of the metrics Collector the wait uses.
type waitingObserver interface{ Waiting(retryAt time.Time) }

// runUntilStopped runs the applier; with --on-permanent-error wait it
// runs it again after each permanent error, as above, until ctx ends.
// It returns Run's last result, and whether that error is already in
// the log (logged).
func (f *runFlags) runUntilStopped(ctx context.Context, log zerolog.Logger, w waitingObserver) (logged bool, err error) {
	var hup chan os.Signal
	if f.onPermanentError == onPermanentWait {
		hup = make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
	}
	for {
		err = apply.Run(ctx, f.cfg)
		if err == nil || ctx.Err() != nil || hup == nil {
			return false, err
		}
		retryAt := time.Now().Add(f.errorRetryInterval)
		logStopped(log.WithLevel(zerolog.ErrorLevel), err,
			fmt.Sprintf("stopped: an error that retrying does not fix; running again in %s, or at once on SIGHUP (fix the cause first)", f.errorRetryInterval))
		if w != nil {
			w.Waiting(retryAt)
		}
		select {
		case <-hup: // one sent before this error does not count
		default:
		}
		timer := time.NewTimer(f.errorRetryInterval)
		select {
		case <-ctx.Done():
			timer.Stop()
			return true, err
		case <-hup:
			timer.Stop()
			log.Info().Msg("SIGHUP: running the applier again")
		case <-timer.C:
			log.Info().Float64("seconds", f.errorRetryInterval.Seconds()).Msg("running the applier again after the permanent error")
		}
		if w != nil {
			w.Waiting(time.Time{})
		}
	}
}
