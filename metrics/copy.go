package metrics

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/walapply/walapply/apply"
)

// copyState is the Collector's record of copies.
//
// The initial copy (and the copy of tables published later), as the
// Collector sees it through apply.CopyObserver:
//
//	walapply_copy_tables{state="pending|copying|done"}  tables of the copy being run (or last run) by state
//	walapply_copy_rows_total, walapply_copy_bytes_total  rows and bytes (COPY data, text or binary) streamed into the target by copies
//	walapply_copy_table_rows{relation}                   rows streamed so far into each table being copied now
//	walapply_copy_ranges{state="pending|done"}           ranges of the big tables the running copy copies in ranges (--copy-split-size)
//	walapply_copy_estimated_seconds_remaining           the copy's ETA from its rate and the source's row estimate
//
// "copying" tables are 'pending' in walapply.copy_state and being copied
// at this moment; "done" counts 'done' and 'copied' ones. The counters
// count work done, also of an attempt that failed and was repeated.
type copyState struct {
	last    apply.CopyProgress // the latest snapshot
	seen    bool
	running bool // last is of a copy not yet complete
	// rows and bytes of attempts before last's
	rows, bytes int64
}

func (s *copyState) observe(p apply.CopyProgress) {
	if s.seen && !p.Started.Equal(s.last.Started) {
		s.rows += s.last.Rows
		s.bytes += s.last.Bytes
	}
	s.last, s.seen, s.running = p, true, !p.Done
}

// ObserveCopy implements apply.CopyObserver.
func (c *Collector) ObserveCopy(p apply.CopyProgress) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.copy.observe(p)
}

var _ apply.CopyObserver = (*Collector)(nil)

// copyReason is /readyz's answer while a copy keeps the applier from
// replicating, "" when none does.
func (c *Collector) copyReason() string {
	s := &c.copy
	if !s.running || c.connected {
		return ""
	}
	// A copy that reported nothing for a while has ended without saying
	// so (its session failed); the usual answer is the truth then.
	if c.opts.Now().Sub(s.last.Started.Add(s.last.Elapsed)) > c.opts.ReadyMaxLag {
		return ""
	}
	p := s.last
	r := fmt.Sprintf("copying %d of %d tables (%d done, %d rows copied", len(p.Copying), p.TablesTotal, p.TablesDone, p.Rows)
	if p.ETA > 0 {
		r += ", about " + p.ETA.Round(time.Second).String() + " left"
	}
	return r + ")"
}

var (
	descCopyTables    = desc("copy_tables", "Tables of the initial copy (or of the copy of tables published later) being run or last run, by state: pending, copying, done.", "state")
	descCopyRows      = desc("copy_rows_total", "Rows streamed into the target by initial copies (and copies of tables published later), committed or not.")
	descCopyBytes     = desc("copy_bytes_total", "Bytes of COPY data (text or binary) streamed into the target by initial copies, committed or not.")
	descCopyTableRows = desc("copy_table_rows", "Rows streamed so far into a table being copied now (uncommitted until its copy commits).", "relation")
	descCopyRanges    = desc("copy_ranges", "Ranges of the big tables (--copy-split-size) the running copy copies in ranges, by state: pending (or being copied), done.", "state")
	descCopyETA       = desc("copy_estimated_seconds_remaining", "Estimated time left of the running copy, from its rate so far and the source's row estimate; absent when unknown.")
)

func copyDescs() []*prometheus.Desc {
	return []*prometheus.Desc{descCopyTables, descCopyRows, descCopyBytes, descCopyTableRows, descCopyRanges, descCopyETA}
}

// collectCopy reports s, a copy of the Collector's.
func collectCopy(s *copyState, ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	p := s.last
	ch <- prometheus.MustNewConstMetric(descCopyRows, prometheus.CounterValue, float64(s.rows+p.Rows))
	ch <- prometheus.MustNewConstMetric(descCopyBytes, prometheus.CounterValue, float64(s.bytes+p.Bytes))
	if !s.seen {
		return
	}
	copying := len(p.Copying)
	gauge(descCopyTables, float64(max(0, p.TablesTotal-p.TablesDone-copying)), "pending")
	gauge(descCopyTables, float64(copying), "copying")
	gauge(descCopyTables, float64(p.TablesDone), "done")
	if !s.running {
		return
	}
	for _, t := range p.Copying {
		gauge(descCopyTableRows, float64(t.Rows), t.Table)
	}
	if p.RangesTotal > 0 {
		gauge(descCopyRanges, float64(p.RangesTotal-p.RangesDone), "pending")
		gauge(descCopyRanges, float64(p.RangesDone), "done")
	}
	if p.ETA > 0 {
		gauge(descCopyETA, p.ETA.Seconds())
	}
}
