package engine

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/apply/internal/parallel"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/state"
	"github.com/walapply/walapply/twophase"
)

// SetRaw passes the message to be handled next as received: a streamed
// transaction's messages are spilled so (stream.go).
//
// This file holds what the run loop asks of the applier besides Handle and
// the flushes (applier_commit.go): methods instead of reaches into its
// fields, so that the loop keeps to the applier's methods (issue 19).
func (a *Applier) SetRaw(data []byte) { a.stream.raw = data }

// InStreamBlock reports whether a stream block (Stream Start to Stream
// Stop) is open.
func (a *Applier) InStreamBlock() bool { return a.machine.InStreamBlock() }

// StopBackground ends what runs beside the applying session: the tables'
// background copies (table_sync.go) and --ddl's source connection
// (ddl_source.go).
func (a *Applier) StopBackground(ctx context.Context) {
	a.watch.stop()
	a.ddl.closeSource(ctx)
}

// TwoPhaseMode is how the applier names prepared transactions (prepare.go).
func (a *Applier) TwoPhaseMode() twophase.Mode { return a.tp.mode }

// SetLeftovers hands the applier the prepared transactions an earlier run
// left on the target (session_twophase.go); Leftovers returns them.
func (a *Applier) SetLeftovers(l *twophase.Leftovers) { a.tp.leftovers = l }

// Leftovers is what SetLeftovers gave.
func (a *Applier) Leftovers() *twophase.Leftovers { return a.tp.leftovers }

// SetStream gives the applier the state of streamed transactions the run
// loop opened (stream.go: the spill directory, the replay's keepalive).
func (a *Applier) SetStream(st streamState) { a.stream = st }

// RemoveSpill removes the spill files of this session and forgets them;
// on is false when streaming is off (no spill directory).
func (a *Applier) RemoveSpill() (removed []string, on bool, err error) {
	st := &a.stream
	if st.dir == nil {
		return nil, false, nil
	}
	removed, err = st.dir.RemoveAll()
	st.files, st.block = map[uint32]*state.SpillFile{}, nil
	return removed, true, err
}

// SpillStats is the spill directory's state; on is false when streaming
// is off.
func (a *Applier) SpillStats() (stats state.SpillStats, on bool) {
	if a.stream.dir == nil {
		return state.SpillStats{}, false
	}
	return a.stream.dir.Stats(), true
}

// SetParallel gives the applier the pool that applies streamed
// transactions as they stream (stream_parallel.go); spillOnly names the
// transactions that must take the spill path all the same (they fell back
// in an earlier session), committed (tests' hook, may be nil) runs right
// after a worker committed.
func (a *Applier) SetParallel(pool *parallel.Pool, spillOnly func(xid uint32) bool, committed func(xid uint32) error) {
	a.stream.par, a.stream.spillOnly, a.stream.committed = pool, spillOnly, committed
}

// CloseParallel closes the pool, if any, and returns the transactions its
// workers had open (parallel.Pool.Close); ok is false without a pool.
func (a *Applier) CloseParallel() (open []uint32, ok bool) {
	if a.stream.par == nil {
		return nil, false
	}
	open = a.stream.par.Close()
	a.stream.par = nil
	return open, true
}

// Applying reports whether a source transaction is being applied or
// grouped ones wait for their commit, and the commit time of the one being
// applied (0 if unknown).
func (a *Applier) Applying() (bool, protocol.Timestamp) {
	return a.machine.InTransaction() || a.group.Count > 0, a.txn.commitTime
}

// Attach gives the applier what Run sets up around it: the control
// connection (catalog lookups, table_watch.go's records), the changes the
// tables' initial copies hold (apply/copy_filter.go), the tables it knows
// (table_watch.go) and --ddl's state (ddl_apply.go, nil without).
func (a *Applier) Attach(control *pgx.Conn, copied *CopyFilter, watch *TableWatch, ddl *DDLState) {
	a.catalog, a.copied, a.watch, a.ddl = control, copied, watch, ddl
}
