package initcopy

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// Snapshot is where the copy stands: the fields of apply's public
// CopyProgress, which documents them and into which apply turns it.
type Snapshot struct {
	TablesTotal, TablesDone int
	Rows, Bytes             int64
	EstimatedRows           int64
	Elapsed                 time.Duration
	RowsPerSec, BytesPerSec float64
	ETA                     time.Duration
	Table                   string
	TableRows               int64
	RangesTotal, RangesDone int
	Done                    bool
	Started                 time.Time
	Copying                 []TableCount
}

// TableCount is one table being copied in a Snapshot: its name as log
// fields give it, and what has streamed into it so far.
type TableCount struct {
	Table       string
	Rows, Bytes int64
}

// Progress counts the copy's progress for the log and the callback.
type Progress struct {
	// tell receives the snapshots (nil: nobody listens); log and
	// interval are the progress line's logger and how often it is logged
	// (0: never).
	tell       func(Snapshot)
	log        zerolog.Logger
	interval   time.Duration
	start      time.Time
	total      int
	est        int64
	tablesDone atomic.Int64
	rows       atomic.Int64
	bytes      atomic.Int64
	ranges     atomic.Int64
	rangesDone atomic.Int64
	mu         sync.Mutex // one call of tell at a time

	runMu   sync.Mutex
	running map[*Table]*tableCount // the tables being copied

	// copied, when set, hears of every table whose copy committed.
	copied func(*Table)
}

// OnCopied makes f hear of every table whose copy committed (--schema's
// early index builds, apply/schema.go).
func (p *Progress) OnCopied(f func(*Table)) { p.copied = f }

// tableCount is what has streamed into one table so far.
type tableCount struct {
	rows, bytes atomic.Int64
	users       int  // copies of it (ranges) running; under runMu
	keep        bool // copied in ranges: kept between them until tableDone
}

// copying records that t's copy starts: add counts into the returned
// tableCount until ended says that the copy ended, committed or not.
func (p *Progress) copying(t *Table) (c *tableCount, ended func()) {
	return p.startCount(t, false)
}

// copyingRange is copying for one range of a table copied in ranges
// (ranges.go): its ranges share the table's count, which stays
// between them until the table is done.
func (p *Progress) copyingRange(t *Table) (c *tableCount, ended func()) {
	return p.startCount(t, true)
}

func (p *Progress) startCount(t *Table, keep bool) (*tableCount, func()) {
	p.runMu.Lock()
	defer p.runMu.Unlock()
	if p.running == nil {
		p.running = map[*Table]*tableCount{}
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

func (p *Progress) ended(t *Table) {
	p.runMu.Lock()
	delete(p.running, t)
	p.runMu.Unlock()
}

// NewProgress starts counting a copy of todo, of total tables of which
// doneBefore an earlier attempt copied. tell, if not nil, receives every
// snapshot, one call at a time; a progress line goes to log every interval
// (0: never) while Report runs.
func NewProgress(total, doneBefore int, todo []*Table, tell func(Snapshot), log zerolog.Logger, interval time.Duration) *Progress {
	p := &Progress{tell: tell, log: log, interval: interval, start: time.Now(), total: total}
	for _, t := range todo {
		p.est += t.estRows
	}
	p.tablesDone.Store(int64(doneBefore))
	return p
}

func (p *Progress) add(c *tableCount, bytes, rows int64) {
	p.bytes.Add(bytes)
	p.rows.Add(rows)
	if c != nil {
		c.bytes.Add(bytes)
		c.rows.Add(rows)
	}
}

// tableDone records a table's committed copy and tells the callback.
func (p *Progress) tableDone(t *Table, rows, counted int64) {
	// The count while streaming (newlines in text, messages in binary,
	// copyPipe.Write) and the target's agree but for binary COPY's
	// trailer; the target's is authoritative.
	p.rows.Add(rows - counted)
	p.ended(t)
	p.tablesDone.Add(1)
	s := p.Snapshot(false)
	s.Table, s.TableRows = t.String(), rows
	p.Tell(s)
	if p.copied != nil {
		p.copied(t)
	}
}

// addRanges counts the ranges of a table to copy in ranges.
func (p *Progress) addRanges(n int) { p.ranges.Add(int64(n)) }

// rangeDone records a range's committed copy (rows and counted as in
// tableDone).
func (p *Progress) rangeDone(rows, counted int64) {
	p.rows.Add(rows - counted)
	p.rangesDone.Add(1)
	p.Tell(p.Snapshot(false))
}

// Snapshot is where the copy stands now; done says that every table is
// copied.
func (p *Progress) Snapshot(done bool) Snapshot {
	s := Snapshot{TablesTotal: p.total, TablesDone: int(p.tablesDone.Load()), Rows: p.rows.Load(), Bytes: p.bytes.Load(),
		EstimatedRows: p.est, Elapsed: time.Since(p.start), Done: done, Started: p.start,
		RangesTotal: int(p.ranges.Load()), RangesDone: int(p.rangesDone.Load())}
	p.runMu.Lock()
	for t, c := range p.running {
		s.Copying = append(s.Copying, TableCount{Table: t.logName(), Rows: c.rows.Load(), Bytes: c.bytes.Load()})
	}
	p.runMu.Unlock()
	slices.SortFunc(s.Copying, func(a, b TableCount) int { return strings.Compare(a.Table, b.Table) })
	if secs := s.Elapsed.Seconds(); secs > 0 {
		s.RowsPerSec, s.BytesPerSec = float64(s.Rows)/secs, float64(s.Bytes)/secs
	}
	if !done && s.RowsPerSec > 0 && s.EstimatedRows > s.Rows {
		s.ETA = time.Duration(float64(s.EstimatedRows-s.Rows) / s.RowsPerSec * float64(time.Second))
	}
	return s
}

// Tell passes a snapshot on to the listener, if any.
func (p *Progress) Tell(s Snapshot) {
	if p.tell == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tell(s)
}

// Report tells the listener where the copy stands at once and about
// every second, and logs a progress line every interval, until stopped.
func (p *Progress) Report(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	p.Tell(p.Snapshot(false)) // the copy is visible from its start
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
				s := p.Snapshot(false)
				p.Tell(s)
				if iv := p.interval; iv > 0 && now.Sub(lastLog) >= iv {
					lastLog = now
					p.logLine(s)
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}

func (p *Progress) logLine(s Snapshot) {
	ev := p.log.Info().Int("tables_done", s.TablesDone).Int("tables_total", s.TablesTotal).
		Int64("rows", s.Rows).Int64("bytes", s.Bytes).
		Float64("rows_per_sec", Round1(s.RowsPerSec)).Float64("mb_per_sec", Round1(s.BytesPerSec/(1<<20)))
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
