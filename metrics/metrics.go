// Package metrics exposes a running applier to Prometheus and to health
// probes: walapply run --metrics-addr serves /metrics, /healthz and /readyz
// on one address.
//
// A Collector is an apply.Observer (set it as apply.Config.Observer) and a
// prometheus.Collector. It holds the last Observation the run loop handed
// it and, at scrape time, turns it into constant metrics; counters are read
// live from the session's apply.Stats, so they are current at every scrape,
// and are summed over sessions, so a reconnect does not reset them.
//
// # Metrics
//
// Positions are source LSNs as numbers (bytes since the start of the WAL;
// exact up to 2^53, 8 PiB):
//
//	walapply_received_lsn          furthest source position received (or reported by the source)
//	walapply_applied_lsn           end of the last source transaction committed on the target
//	walapply_confirmed_lsn         flush position confirmed to the source (durable on the target)
//	walapply_lag_bytes             received - confirmed; 0 when caught up
//	walapply_lag_seconds           age of the oldest source commit in flight; 0 when caught up
//	walapply_last_commit_timestamp_seconds  source commit time of the last applied transaction
//	walapply_last_message_receipt_timestamp_seconds    when the last message (data or keepalive) came from the source
//	walapply_last_keepalive_receipt_timestamp_seconds  when the last keepalive came from the source
//	walapply_caught_up             1 when nothing is in flight and everything received is confirmed
//	walapply_connected             1 while a session replicates
//	walapply_ready                 what /readyz answers, as 1 or 0
//	walapply_transactions_total{outcome="applied|skipped"}
//	walapply_target_commits_total  target transactions committed (group commit folds several source transactions into one)
//	walapply_rows_total{operation="insert|update|delete"}  row changes applied
//	walapply_rows_inserted_with_copy_total  of the inserted rows, those sent with COPY instead of INSERT
//	walapply_missing_rows_total    UPDATEs and DELETEs whose row was not on the target
//	walapply_truncates_total       TRUNCATE statements applied
//	walapply_conflicts_total{kind} conflicts, named as PostgreSQL 18 names them; every kind from the start, at 0
//	walapply_spill_files, walapply_spill_bytes  spill files of streamed transactions in progress
//	walapply_reconnects_total      sessions that ended with an error after which walapply reconnected
//	walapply_errors_total{kind="transient|permanent"}  errors that ended a session
//	walapply_build_info{version,revision,goversion}     1: which walapply this is
//	walapply_applier_info{name,slot,publications}       1: what it replicates (Options.Applier)
//	walapply_copy_*                                     the initial copy: see copy.go
//	walapply_last_error_*                               the last error that ended a session: see last_error.go
//
// Timestamps are Unix seconds. The receipt times are absent until the
// first message (keepalive) of the run: an alert on their age, e.g.
// time() - walapply_last_message_receipt_timestamp_seconds > 300, sees a
// source that has gone silent, or a loop that has stopped reading.
//
// plus the Go runtime and process collectors. Row and transaction counts
// include work of target transactions that were rolled back after an error
// and applied again after the reconnect: they count work done, not distinct
// source changes.
//
// # Probes
//
// /healthz answers 200 while the process serves HTTP: walapply retries
// every transient failure itself, and a restart by the orchestrator would
// only repeat that. /readyz answers 200 when a session is replicating, its
// last progress report is at most Options.ReadyMaxLag old, and it is caught
// up or lags by at most ReadyMaxLag; else 503 with the reason ("copying 2
// of 10 tables (3 done, ...)" during the initial copy).
package metrics

import (
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/internal/buildinfo"
	"github.com/walapply/walapply/protocol"
)

// DefaultReadyMaxLag is Options.ReadyMaxLag's default.
const DefaultReadyMaxLag = 30 * time.Second

// Options configures a Collector.
type Options struct {
	// ReadyMaxLag is the largest lag, and the oldest progress report, with
	// which /readyz still answers ready. Default DefaultReadyMaxLag. Keep
	// it well above the applier's feedback interval.
	ReadyMaxLag time.Duration
	// Now returns the current time (default time.Now).
	Now func() time.Time
	// Applier names what the applier replicates, for
	// walapply_applier_info; the zero value reports no such series.
	Applier ApplierInfo
}

// ApplierInfo is the label set of walapply_applier_info.
type ApplierInfo struct {
	Name         string // apply.Config.Name (the slot's name by default)
	Slot         string
	Publications []string
}

// counts are the counters of apply.Stats, read at one moment.
type counts struct {
	txnsApplied, txnsSkipped          int64
	commits                           int64
	inserts, updates, deletes, truncs int64
	copiedRows, missingRows           int64
	parallelApplied, parallelFallback int64
	conflicts                         map[string]int64
}

func readStats(s *apply.Stats) counts {
	if s == nil {
		return counts{}
	}
	return counts{
		txnsApplied: s.TxnsApplied.Load(), txnsSkipped: s.TxnsSkipped.Load(), commits: s.Commits.Load(),
		inserts: s.Inserts.Load(), updates: s.Updates.Load(), deletes: s.Deletes.Load(), truncs: s.Truncates.Load(),
		copiedRows: s.CopiedRows.Load(), missingRows: s.MissingRows.Load(),
		parallelApplied: s.ParallelApplied.Load(), parallelFallback: s.ParallelFallbacks.Load(),
		conflicts: s.Conflicts.Snapshot(),
	}
}

func (c *counts) add(o counts) {
	c.txnsApplied += o.txnsApplied
	c.txnsSkipped += o.txnsSkipped
	c.commits += o.commits
	c.copiedRows += o.copiedRows
	c.missingRows += o.missingRows
	c.parallelApplied += o.parallelApplied
	c.parallelFallback += o.parallelFallback
	c.inserts += o.inserts
	c.updates += o.updates
	c.deletes += o.deletes
	c.truncs += o.truncs
	for k, v := range o.conflicts {
		if c.conflicts == nil {
			c.conflicts = map[string]int64{}
		}
		c.conflicts[k] += v
	}
}

// Collector watches an applier (apply.Observer) and reports it to
// Prometheus (prometheus.Collector) and to the probes. It is safe for
// concurrent use: the run loop writes, scrapes and probes read.
type Collector struct {
	opts Options

	mu        sync.Mutex
	connected bool
	obs       apply.Observation // the last one
	haveObs   bool              // obs belongs to the current session
	stats     *apply.Stats      // the current session's counters
	done      counts            // the counters of earlier sessions
	reconnect int64
	errors    map[string]int64 // by kind
	// the latest receipt times over all sessions
	lastMessage, lastKeepalive time.Time
	build                      buildinfo.Info
	copy                       copyState // copy.go
	last                       lastError // last_error.go
}

// New returns a Collector.
func New(opts Options) *Collector {
	if opts.ReadyMaxLag <= 0 {
		opts.ReadyMaxLag = DefaultReadyMaxLag
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Collector{opts: opts, errors: map[string]int64{"transient": 0, "permanent": 0}, build: buildinfo.Read()}
}

var _ apply.Observer = (*Collector)(nil)

// Connected implements apply.Observer.
func (c *Collector) Connected(start protocol.LSN) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.connected, c.haveObs = true, false
}

// Observe implements apply.Observer.
func (c *Collector) Observe(o apply.Observation) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if o.Stats != c.stats {
		// A new session: what the last one counted is final now.
		c.done.add(readStats(c.stats))
		c.stats = o.Stats
	}
	c.obs, c.haveObs = o, true
	if o.LastMessageAt.After(c.lastMessage) {
		c.lastMessage = o.LastMessageAt
	}
	if o.LastKeepaliveAt.After(c.lastKeepalive) {
		c.lastKeepalive = o.LastKeepaliveAt
	}
}

// SessionEnded implements apply.Observer.
func (c *Collector) SessionEnded(err error, reconnect bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.connected = false
	kind := "permanent"
	if apply.IsTransient(err) {
		kind = "transient"
	}
	c.errors[kind]++
	c.last.record(err, kind, c.opts.Now())
	if reconnect {
		c.reconnect++
	}
}

// Ready reports whether the applier is ready (see the package doc) and, if
// not, why.
func (c *Collector) Ready() (bool, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.readyLocked()
}

func (c *Collector) readyLocked() (bool, string) {
	max := c.opts.ReadyMaxLag
	switch {
	case !c.connected && c.waitingReason() != "":
		return false, c.waitingReason()
	case !c.connected && c.copyReason() != "":
		return false, c.copyReason()
	case !c.connected:
		return false, "not connected: no replication session is running"
	case !c.haveObs:
		return false, "connected; no progress report yet"
	}
	if age := c.opts.Now().Sub(c.obs.Time); age > max {
		return false, "no progress report for " + age.Round(time.Millisecond).String() + " (more than " + max.String() + ")"
	}
	switch {
	case c.obs.CaughtUp:
		return true, "caught up"
	case !c.obs.LagKnown:
		return false, "catching up; the lag is not known yet"
	case c.obs.Lag > max:
		return false, "lagging " + c.obs.Lag.Round(time.Millisecond).String() + " behind the source (more than " + max.String() + ")"
	}
	return true, "lagging " + c.obs.Lag.Round(time.Millisecond).String() + " behind the source"
}

var (
	descReceived   = desc("received_lsn", "Furthest source position (LSN) received from, or reported by, the source.")
	descApplied    = desc("applied_lsn", "End LSN of the last source transaction committed on the target.")
	descConfirmed  = desc("confirmed_lsn", "Flush position (LSN) confirmed to the source: durable on the target.")
	descLagBytes   = desc("lag_bytes", "Bytes of source WAL received or reported but not yet confirmed; 0 when caught up.")
	descLagSeconds = desc("lag_seconds", "Age of the source commit time of the oldest transaction in flight; 0 when caught up.")
	descLastCommit = desc("last_commit_timestamp_seconds", "Source commit time of the last applied transaction, in Unix seconds.")
	descLastMsg    = desc("last_message_receipt_timestamp_seconds", "When the last message (data or keepalive) was received from the source's walsender, in Unix seconds.")
	descLastKeep   = desc("last_keepalive_receipt_timestamp_seconds", "When the last keepalive was received from the source's walsender, in Unix seconds.")
	descCaughtUp   = desc("caught_up", "1 when no transaction is in flight and everything received is confirmed.")
	descConnected  = desc("connected", "1 while a replication session is running.")
	descReady      = desc("ready", "1 when /readyz answers ready.")
	descTxns       = desc("transactions_total", "Source transactions by outcome: applied, or skipped as applied before a restart.", "outcome")
	descCommits    = desc("target_commits_total", "Target transactions committed; group commit folds several source transactions into one.")
	descRows       = desc("rows_total", "Row changes applied, by operation.", "operation")
	descCopied     = desc("rows_inserted_with_copy_total", "Of the inserted rows, those sent to the target with COPY instead of INSERT.")
	descMissing    = desc("missing_rows_total", "UPDATEs and DELETEs whose row was not found on the target (logged and skipped).")
	descTruncates  = desc("truncates_total", "TRUNCATE statements applied.")
	descConflicts  = desc("conflicts_total", "Conflicts by kind, named as PostgreSQL 18's subscriber names them.", "kind")
	descSpillFiles = desc("spill_files", "Spill files of streamed transactions in progress.")
	descParallel   = desc("streamed_parallel_total", "With --streaming parallel, streamed transactions by outcome: applied as they streamed, or fallen back to the spill path.", "outcome")
	descSpillBytes = desc("spill_bytes", "Total size of the spill files of streamed transactions in progress.")
	descReconnects = desc("reconnects_total", "Sessions that ended with an error after which walapply reconnected.")
	descErrors     = desc("errors_total", "Errors that ended a replication session, by kind (transient: retried; permanent: stops, or retried once without group commit).", "kind")
	descBuild      = desc("build_info", "1, labelled with the version of walapply, the revision it was built from and the Go version.", "version", "revision", "goversion")
	descApplier    = desc("applier_info", "1, labelled with the applier's name, its slot and its publications (comma-separated).", "name", "slot", "publications")
)

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("walapply_"+name, help, labels, nil)
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descReceived, descApplied, descConfirmed, descLagBytes, descLagSeconds,
		descLastCommit, descLastMsg, descLastKeep, descCaughtUp, descConnected, descReady, descTxns, descCommits,
		descRows, descCopied, descMissing, descTruncates, descConflicts, descSpillFiles, descSpillBytes,
		descParallel, descReconnects, descErrors, descBuild, descApplier} {
		ch <- d
	}
	for _, d := range append(copyDescs(), descLastErrorTime, descLastErrorInfo) {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	o, have, connected := c.obs, c.haveObs || c.stats != nil, c.connected
	var total counts
	total.add(c.done)
	total.add(readStats(c.stats))
	ready, _ := c.readyLocked()
	reconnects := c.reconnect
	lastMsg, lastKeep := c.lastMessage, c.lastKeepalive
	errs := make(map[string]int64, len(c.errors))
	for k, v := range c.errors {
		errs[k] = v
	}
	cs, le := c.copy, c.last
	c.mu.Unlock()
	collectCopy(&cs, ch)
	collectLastError(&le, ch)

	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge(descConnected, b2f(connected))
	gauge(descReady, b2f(ready))
	gauge(descBuild, 1, c.build.Version, c.build.Revision, c.build.GoVersion)
	if a := c.opts.Applier; a.Name != "" || a.Slot != "" {
		gauge(descApplier, 1, a.Name, a.Slot, strings.Join(a.Publications, ","))
	}
	if !lastMsg.IsZero() {
		gauge(descLastMsg, unixSeconds(lastMsg))
	}
	if !lastKeep.IsZero() {
		gauge(descLastKeep, unixSeconds(lastKeep))
	}
	if have {
		gauge(descReceived, float64(o.Received))
		gauge(descApplied, float64(o.Applied))
		gauge(descConfirmed, float64(o.Flushed))
		gauge(descLagBytes, float64(o.LagBytes))
		gauge(descLagSeconds, o.Lag.Seconds())
		gauge(descCaughtUp, b2f(o.CaughtUp))
		if !o.LastCommitAt.IsZero() {
			gauge(descLastCommit, unixSeconds(o.LastCommitAt))
		}
		gauge(descSpillFiles, float64(o.Spill.Files))
		gauge(descSpillBytes, float64(o.Spill.Bytes))
	}
	counter(descTxns, total.txnsApplied, "applied")
	counter(descTxns, total.txnsSkipped, "skipped")
	counter(descCommits, total.commits)
	counter(descCopied, total.copiedRows)
	counter(descMissing, total.missingRows)
	counter(descParallel, total.parallelApplied, "applied")
	counter(descParallel, total.parallelFallback, "fallback")
	counter(descRows, total.inserts, "insert")
	counter(descRows, total.updates, "update")
	counter(descRows, total.deletes, "delete")
	counter(descTruncates, total.truncs)
	// Every kind from the start, as 0, so that a rate or an increase
	// over each exists before its first conflict.
	for _, k := range apply.ConflictKinds() {
		if _, ok := total.conflicts[k]; !ok {
			counter(descConflicts, 0, k)
		}
	}
	for k, v := range total.conflicts {
		counter(descConflicts, v, k)
	}
	counter(descReconnects, reconnects)
	for k, v := range errs {
		counter(descErrors, v, k)
	}
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
