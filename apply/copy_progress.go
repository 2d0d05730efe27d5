package apply

import (
	"context"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// CopyProgress is where the initial copy stands (Config.OnCopyProgress).
type CopyProgress struct {
	TablesTotal int
	// TablesDone includes the tables an earlier, interrupted attempt
	// copied.
	TablesDone int
	// Rows and Bytes (in the COPY format of each table: binary or text,
	// copy_format.go) copied by this attempt so far, counted as they
	// stream, committed or not.
	Rows, Bytes int64
	// EstimatedRows is the source's estimate (pg_class.reltuples) of the
	// rows this attempt copies; 0 when the source has none (tables never
	// vacuumed or analyzed).
	EstimatedRows int64
	Elapsed       time.Duration
	RowsPerSec    float64
	BytesPerSec   float64
	// ETA is the estimated time left, from the rate so far and
	// EstimatedRows; 0 when unknown.
	ETA time.Duration
	// Table and TableRows name the table whose copy just committed, in
	// the call made for it; empty in periodic calls.
	Table     string
	TableRows int64
	// RangesTotal and RangesDone count the ranges of the tables this
	// attempt copies in ranges (copy_ranges.go), as they are planned.
	RangesTotal, RangesDone int
	// Done: every table is copied, and streaming starts from the slot's
	// consistent point.
	Done bool
	// Started is when this attempt began: a new value is a new attempt
	// (a restarted copy, or a copy of tables published later), whose
	// Rows and Bytes start from 0 again.
	Started time.Time
	// Copying are the tables being copied at this moment, by name, with
	// what has streamed into each so far (uncommitted until the table's
	// copy commits).
	Copying []TableCopyProgress
}

// TableCopyProgress is one table being copied.
type TableCopyProgress struct {
	Table       string // schema.table, unquoted as in log fields
	Rows, Bytes int64
}

// ObserveCopy, when Config.Observer has it, is called with the same
// snapshots as Config.OnCopyProgress: about every second during an
// initial copy (or a copy of tables published later), after each table,
// and once when the copy is complete. It must return quickly.
type CopyObserver interface {
	ObserveCopy(CopyProgress)
}

// copyProgress counts the copy's progress for the log and the callback.
type copyProgress struct {
	cfg        *Config
	start      time.Time
	total      int
	est        int64
	tablesDone atomic.Int64
	rows       atomic.Int64
	bytes      atomic.Int64
	ranges     atomic.Int64
	rangesDone atomic.Int64
	mu         sync.Mutex // one OnCopyProgress call at a time

	runMu   sync.Mutex
	running map[*copyTable]*tableCount // the tables being copied

	// copied, when set, hears of every table whose copy committed.
	copied func(*copyTable)
}

// tableCount is what has streamed into one table so far.
type tableCount struct {
	rows, bytes atomic.Int64
	users       int  // copies of it (ranges) running; under runMu
	keep        bool // copied in ranges: kept between them until tableDone
}

// copying records that t's copy starts: add counts into the returned
// tableCount until ended says that the copy ended, committed or not.
func (p *copyProgress) copying(t *copyTable) (c *tableCount, ended func()) {
	return p.startCount(t, false)
}

// copyingRange is copying for one range of a table copied in ranges
// (copy_ranges.go): its ranges share the table's count, which stays
// between them until the table is done.
func (p *copyProgress) copyingRange(t *copyTable) (c *tableCount, ended func()) {
	return p.startCount(t, true)
}

func (p *copyProgress) startCount(t *copyTable, keep bool) (*tableCount, func()) {
	p.runMu.Lock()
	defer p.runMu.Unlock()
	if p.running == nil {
		p.running = map[*copyTable]*tableCount{}
	}
	c := p.running[t]
	if c == nil {
		c = &tableCount{}
		p.running[t] = c
	}
	c.users++
	c.keep = c.keep || keep
	return c, func() {
		p.runMu.Lock()
		defer p.runMu.Unlock()
		if c.users--; c.users == 0 && !c.keep && p.running[t] == c {
			delete(p.running, t)
		}
	}
}

func (p *copyProgress) ended(t *copyTable) {
	p.runMu.Lock()
	delete(p.running, t)
	p.runMu.Unlock()
}

func newCopyProgress(cfg *Config, total, doneBefore int, todo []*copyTable) *copyProgress {
	p := &copyProgress{cfg: cfg, start: time.Now(), total: total}
	for _, t := range todo {
		p.est += t.estRows
	}
	p.tablesDone.Store(int64(doneBefore))
	return p
}

func (p *copyProgress) add(c *tableCount, bytes, rows int64) {
	p.bytes.Add(bytes)
	p.rows.Add(rows)
	if c != nil {
		c.bytes.Add(bytes)
		c.rows.Add(rows)
	}
}

// tableDone records a table's committed copy and tells the callback.
func (p *copyProgress) tableDone(t *copyTable, rows, counted int64) {
	// The count while streaming (newlines in text, messages in binary,
	// copyPipe.Write) and the target's agree but for binary COPY's
	// trailer; the target's is authoritative.
	p.rows.Add(rows - counted)
	p.ended(t)
	p.tablesDone.Add(1)
	s := p.snapshot(false)
	s.Table, s.TableRows = t.String(), rows
	p.call(s)
	if p.copied != nil {
		p.copied(t)
	}
}

// addRanges counts the ranges of a table to copy in ranges.
func (p *copyProgress) addRanges(n int) { p.ranges.Add(int64(n)) }

// rangeDone records a range's committed copy (rows and counted as in
// tableDone).
func (p *copyProgress) rangeDone(rows, counted int64) {
	p.rows.Add(rows - counted)
	p.rangesDone.Add(1)
	p.call(p.snapshot(false))
}

func (p *copyProgress) snapshot(done bool) CopyProgress {
	s := CopyProgress{TablesTotal: p.total, TablesDone: int(p.tablesDone.Load()), Rows: p.rows.Load(), Bytes: p.bytes.Load(),
		EstimatedRows: p.est, Elapsed: time.Since(p.start), Done: done, Started: p.start,
		RangesTotal: int(p.ranges.Load()), RangesDone: int(p.rangesDone.Load())}
	p.runMu.Lock()
	for t, c := range p.running {
		s.Copying = append(s.Copying, TableCopyProgress{Table: sqlgen.LogRelation(t.schema, t.name), Rows: c.rows.Load(), Bytes: c.bytes.Load()})
	}
	p.runMu.Unlock()
	slices.SortFunc(s.Copying, func(a, b TableCopyProgress) int { return strings.Compare(a.Table, b.Table) })
	if secs := s.Elapsed.Seconds(); secs > 0 {
		s.RowsPerSec, s.BytesPerSec = float64(s.Rows)/secs, float64(s.Bytes)/secs
	}
	if !done && s.RowsPerSec > 0 && s.EstimatedRows > s.Rows {
		s.ETA = time.Duration(float64(s.EstimatedRows-s.Rows) / s.RowsPerSec * float64(time.Second))
	}
	return s
}

func (p *copyProgress) call(s CopyProgress) {
	o, _ := p.cfg.Observer.(CopyObserver)
	if p.cfg.OnCopyProgress == nil && o == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cfg.OnCopyProgress != nil {
		p.cfg.OnCopyProgress(s)
	}
	if o != nil {
		o.ObserveCopy(s)
	}
}

// report calls OnCopyProgress at once and about every second and logs a progress line
// every ProgressInterval until stopped.
func (p *copyProgress) report(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	p.call(p.snapshot(false)) // the copy is visible from its start
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		lastLog := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				s := p.snapshot(false)
				p.call(s)
				if iv := p.cfg.ProgressInterval; iv > 0 && now.Sub(lastLog) >= iv {
					lastLog = now
					p.log(s)
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}

func (p *copyProgress) log(s CopyProgress) {
	ev := p.cfg.Logger.Info().Int("tables_done", s.TablesDone).Int("tables_total", s.TablesTotal).
		Int64("rows", s.Rows).Int64("bytes", s.Bytes).
		Float64("rows_per_sec", round1(s.RowsPerSec)).Float64("mb_per_sec", round1(s.BytesPerSec/(1<<20)))
	if s.RangesTotal > 0 {
		ev = ev.Int("ranges_done", s.RangesDone).Int("ranges_total", s.RangesTotal)
	}
	if s.EstimatedRows > 0 {
		ev = ev.Int64("estimated_rows", s.EstimatedRows)
	}
	if s.ETA > 0 {
		ev = ev.Str("eta", s.ETA.Round(time.Second).String())
	}
	ev.Msg("initial copy progress")
}
