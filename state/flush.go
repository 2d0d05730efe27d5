package state

import "github.com/walapply/walapply/protocol"

// FlushTracker decides the write, flush and apply positions that the applier
// reports to the source in standby status updates. It keeps DESIGN.md
// invariant 2: the flush position, which lets the source recycle WAL and
// advance the slot's confirmed_flush_lsn, never covers a source transaction
// whose target commit might still be lost.
//
// It is a pure state machine in the etcd raft style: the apply loop tells it
// what happened (Received, BeginTxn, Applied, EndTxn, Durable, Restart) and asks
// it what to send (Feedback). It does no I/O and takes no locks; the caller
// serializes all calls, normally from the goroutine that reads the stream.
//
// # Positions
//
//   - received: the end of the WAL received so far. Every byte before it has
//     been read off the stream and handed to the apply loop.
//   - applied: the end LSN of the last source transaction the target has
//     committed (or prepared). With synchronous_commit = off that commit may
//     still be only in the target's WAL buffers.
//   - durable: what pg_replication_origin_progress(origin, true) returned. That
//     call flushes the target's WAL up to the origin's latest commit first, and
//     target WAL is flushed in order, so every transaction whose end LSN is at
//     or below durable survives a target crash.
//
// # What is reported
//
//   - write = received.
//   - flush = durable while a transaction is in progress or some applied
//     transaction is not yet known durable. Only when the applier is idle (no
//     transaction in progress) and everything applied is durable, flush =
//     received: every byte up to received then belongs either to a transaction
//     that is durable on the target or to nothing the target needs, so nothing
//     the source would skip after a restart can be lost. PostgreSQL's apply
//     worker does the same in send_feedback (worker.c) when it has no pending
//     transactions. Such a flush position lies past the origin's progress;
//     apply records it on the target before sending it (apply/identity.go),
//     so that a start can tell it from a slot moved by something else.
//   - apply = the last applied end LSN, or received when idle in the same sense.
//
// All three are reported monotonically (a value once sent is never undercut),
// and write >= apply >= flush always holds: a position once safe stays safe, and
// the walsender ignores positions that move backwards anyway.
//
// # Calling order
//
// The caller reports the data of a message with Received and then the
// transaction bookkeeping that message implies (BeginTxn for a Begin, Applied
// after the target commit of a Commit, ...) before it asks for Feedback again.
// Received for a keepalive's WAL end may be reported at any time: the
// walsender writes a keepalive after all data it covers, so everything before
// its WAL end has already been received and handed to the apply loop.
//
// Every BeginTxn is balanced by exactly one Applied, EndTxn or SkippedTxn.
// When several source transactions share one target transaction (group
// commit), or the next transaction starts before the target has acknowledged
// the previous commit (pipelining), call BeginTxn for each and, once the
// target commit is acknowledged, Applied for each in source order. A
// transaction is in progress from its BeginTxn until its balancing call, so
// the received position is never confirmed while a commit that it covers is
// still in flight.
//
// # Streamed transactions
//
// The chunks of a streamed in-progress transaction (Stream Start … Stream
// Stop, protocol 2 and later) go to a spill file and call only Received; the
// transaction counts as in progress (BeginTxn) only from the start of its
// replay at Stream Commit or Stream Prepare. Confirming a flush position past
// such chunks is safe: the transaction's commit (or prepare) record lies
// beyond them, and logical decoding on the source resends, in full, every
// transaction whose commit lies after the confirmed position, so after a
// restart the source streams the transaction again from its first change.
// That is also why spill files are discarded at start. Holding the flush
// position back for streamed transactions would instead pin the source's WAL
// for as long as the largest transaction runs.
type FlushTracker struct {
	received protocol.LSN
	applied  protocol.LSN
	durable  protocol.LSN
	open     int // transactions begun and not yet balanced

	// What Feedback last returned, to keep the reported positions monotonic.
	sentWrite, sentFlush, sentApply protocol.LSN
}

// NewFlushTracker returns a tracker for a stream that starts at start, a
// position already durable on the target: the origin's progress read with
// flush = true.
func NewFlushTracker(start protocol.LSN) *FlushTracker {
	return &FlushTracker{received: start, applied: start, durable: start}
}

// Received records that the WAL up to lsn has been received: the start of an
// XLogData message plus the length of its data, or a keepalive's server WAL
// end. Positions below one already received are ignored.
func (t *FlushTracker) Received(lsn protocol.LSN) {
	t.received = max(t.received, lsn)
}

// BeginTxn records that a source transaction started arriving (a Begin or
// Begin Prepare, a standalone Commit Prepared or Rollback Prepared), or that
// the replay of a streamed transaction started.
func (t *FlushTracker) BeginTxn() {
	t.open++
}

// Applied records that the target committed or prepared the source
// transaction whose end LSN is end, not yet known to be durable. It balances
// one BeginTxn.
func (t *FlushTracker) Applied(end protocol.LSN) {
	t.closeOne()
	t.applied = max(t.applied, end)
	// The commit's end LSN can lie past the received position, which counts
	// only the bytes of the messages (XLogData start plus length): the write
	// position must never fall behind what is applied.
	t.received = max(t.received, end)
}

// EndTxn records that a transaction ended without a target commit: it was
// empty, or it was rolled back on the source. It balances one BeginTxn.
func (t *FlushTracker) EndTxn() {
	t.closeOne()
}

// SkippedTxn records that a transaction was skipped because the origin shows
// it was applied before (its end LSN is at or below the origin's progress,
// DESIGN.md invariant 1). It is EndTxn, named for that call site.
func (t *FlushTracker) SkippedTxn() {
	t.closeOne()
}

// closeOne balances one BeginTxn. An unbalanced call (a commit handled without
// a BeginTxn) does not drive the count negative, which would make a later
// transaction look idle.
func (t *FlushTracker) closeOne() {
	if t.open > 0 {
		t.open--
	}
}

// Durable records the position returned by pg_replication_origin_progress
// (origin, true): every target commit of a source transaction ending at or
// below lsn is flushed on the target.
func (t *FlushTracker) Durable(lsn protocol.LSN) {
	t.durable = max(t.durable, lsn)
	// A durable commit is an applied one, also when it was applied by an
	// earlier run of the applier.
	t.applied = max(t.applied, t.durable)
	t.received = max(t.received, t.durable)
}

// DurableLSN returns the durable position: the highest origin progress
// recorded with Durable (or the start).
func (t *FlushTracker) DurableLSN() protocol.LSN {
	return t.durable
}

// Restart records that every transaction in progress was rolled back on the
// target (the target connection failed, or the stream was restarted) and that
// the stream restarts at start, the origin's progress on the target. The
// received position falls back to start: the data received after it belongs
// to transactions that the source sends again. Applied commits after start,
// if any, were lost by a target crash and are applied again.
func (t *FlushTracker) Restart(start protocol.LSN) {
	t.open = 0
	t.applied = max(start, t.durable)
	t.received = t.applied
}

// AllDurable reports whether no transaction is in progress and everything applied
// is known durable, the state in which the received position is confirmed.
func (t *FlushTracker) AllDurable() bool {
	return t.open == 0 && t.applied <= t.durable
}

// NeedsDurableCheck reports whether some applied transaction is not yet known
// durable, so that calling pg_replication_origin_progress(origin, true) would
// let the flush position advance.
func (t *FlushTracker) NeedsDurableCheck() bool {
	return t.applied > t.durable
}

// Feedback returns the positions to send in the next standby status update.
// Always send all three: pglogrepl fills unset flush and apply positions with
// the write position, which would confirm data that is not durable.
func (t *FlushTracker) Feedback() (write, flush, apply protocol.LSN) {
	flush, apply = t.durable, t.applied
	if t.AllDurable() {
		flush, apply = t.received, t.received
	}
	// Monotonic. Safe: a position once confirmed covered only durable commits
	// or no commit at all, and later transactions end after it.
	t.sentFlush = max(t.sentFlush, flush)
	t.sentApply = max(t.sentApply, apply, t.sentFlush)
	t.sentWrite = max(t.sentWrite, t.received, t.sentApply)
	return t.sentWrite, t.sentFlush, t.sentApply
}
