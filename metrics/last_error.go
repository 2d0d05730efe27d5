package metrics

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/walapply/walapply/apply"
)

// lastError is the Collector's record of the last error.
//
// The last error that ended a session, for alerts that must see a
// permanent error (walapply run --on-permanent-error wait keeps the
// process up, not ready, serving these):
//
//	walapply_last_error_timestamp_seconds  when the last error that ended a session happened (Unix seconds)
//	walapply_last_error_info{kind,relation,operation,commit_lsn,sqlstate}  1, labelled with its facts
//
// The info series is one at a time (the last error's); its label values
// are bounded by the tables, operations and SQLSTATEs there are, and by
// one commit LSN.
type lastError struct {
	at    time.Time
	kind  string
	facts apply.ErrorFacts
	// retryAt: Run stopped with the error, and the command waits until
	// then (or SIGHUP) before it runs again; zero otherwise.
	retryAt time.Time
}

func (e *lastError) record(err error, kind string, now time.Time) {
	*e = lastError{at: now, kind: kind, facts: apply.FactsOf(err)}
}

// Waiting tells the Collector that the applier stopped with the last
// error and is run again at retryAt (or earlier, on SIGHUP): /readyz
// says so until the next session connects.
func (c *Collector) Waiting(retryAt time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last.retryAt = retryAt
}

// waitingReason is /readyz's answer while the applier waits after a
// permanent error, "" otherwise. It names the error's facts, not its
// text.
func (c *Collector) waitingReason() string {
	e := c.last
	if e.retryAt.IsZero() || c.connected {
		return ""
	}
	r := "stopped by a permanent error at " + e.at.UTC().Format(time.DateTime) + " UTC"
	f := e.facts
	var what string
	if f.Operation != "" {
		what = f.Operation
	}
	if f.Relation != "" {
		what += " on " + f.Relation
	}
	if f.Txn {
		what += fmt.Sprintf(", commit LSN %s", f.CommitLSN)
	}
	if f.SQLState != "" {
		what += ", SQLSTATE " + f.SQLState
	}
	if what != "" {
		r += " (" + what + ")"
	}
	left := max(0, e.retryAt.Sub(c.opts.Now())).Round(time.Second)
	return r + "; see the log; retrying in " + left.String() + ", or at once on SIGHUP"
}

var (
	descLastErrorTime = desc("last_error_timestamp_seconds", "When the last error that ended a replication session happened, in Unix seconds.")
	descLastErrorInfo = desc("last_error_info", "1, labelled with the facts of the last error that ended a replication session: its kind (transient|permanent), the relation, the operation, the source commit LSN and the SQLSTATE (empty when it names none).",
		"kind", "relation", "operation", "commit_lsn", "sqlstate")
)

// collectLastError reports e, a copy of the Collector's.
func collectLastError(e *lastError, ch chan<- prometheus.Metric) {
	if e.at.IsZero() {
		return
	}
	f := e.facts
	lsn := ""
	if f.Txn {
		lsn = f.CommitLSN.String()
	}
	ch <- prometheus.MustNewConstMetric(descLastErrorTime, prometheus.GaugeValue, unixSeconds(e.at))
	ch <- prometheus.MustNewConstMetric(descLastErrorInfo, prometheus.GaugeValue, 1, e.kind, f.Relation, f.Operation, lsn, f.SQLState)
}
