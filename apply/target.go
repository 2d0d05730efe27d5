package apply

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/state"
)

// Bounds of one batch of queued statements. A transaction larger than this
// is sent in several batches inside one target transaction, so memory does
// not grow with the transaction (DESIGN.md invariant 3).
const (
	maxBatchStatements = 1000
	maxBatchBytes      = 4 << 20
)

// opKind is what a queued statement does.
type opKind uint8

const (
	opBegin opKind = iota
	opInsert
	opUpdate
	opDelete
	opTruncate
	opOrigin
	opCommit
	opCopy // a run of inserts sent with COPY (target_copy.go)
)

var opNames = [...]string{OpBegin, OpInsert, OpUpdate, OpDelete, OpTruncate, OpOriginProgress, OpCommit, OpCopy} // ops.go

func (o opKind) String() string { return opNames[o] }

// queuedStmt remembers what a statement in the batch was for, so that its
// result can be checked and an error reported with the relation it concerns.
type queuedStmt struct {
	op        opKind
	rel       *relmap.Entry
	sql       string // the statement's SQL, for rel.params
	keyStart  int    // the row's key, rendered into targetSession.keys, for messages
	keyEnd    int
	xid       uint32       // the source transaction it belongs to
	commitLSN protocol.LSN // ... and its commit LSN
	// firstLSN is the commit LSN of the first source transaction in the
	// same target transaction (group commit): when it differs from
	// commitLSN, a failure rolls back earlier source transactions too.
	firstLSN protocol.LSN
	// rows is how many rows a multi-row UPDATE or DELETE should change
	// (0 means 1).
	rows int
	// conflict names the conflict kind the statement records itself
	// (conflict_sql.go): its result rows are the keys that conflicted.
	conflict string
}

// targetSession is the connection that applies changes on the target. It
// queues statements into a pgconn.Batch, which encodes them at once (so the
// caller's buffers may be reused right away) and sends them in one round
// trip when flushed.
type targetSession struct {
	stmtQueue // what the queued statements are for (applier_target.go)

	conn  *pgx.Conn
	pg    *pgconn.PgConn
	batch *pgconn.Batch
	bytes int
	seq   int // prepared statement names

	origin string   // the replication origin set up on the session
	flying inflight // the batch sent and not yet read

	// steps are the parts of the queue before batch when it holds a COPY
	// (target_copy.go); closed counts the queued statements they hold.
	steps  []sendStep
	closed int

	// unprepared are statements handed out by statementFor while a batch
	// was in flight: batches parse them (unnamed) until the connection is
	// next idle, when they are prepared for good.
	unprepared map[*pgconn.StatementDescription]struct{}
}

// sessionSetupSQL makes the target session behave like PostgreSQL's apply
// worker (DESIGN.md invariant 8): ordinary triggers and foreign keys do not
// fire, commits do not wait for the disk (durability is established
// separately through the origin's progress, invariant 2), and values are
// read in the formats the source writes them.
var sessionSetupSQL = []string{
	"SET session_replication_role = replica",
	"SET synchronous_commit = off",
	"SET search_path = pg_catalog",
	"SET DateStyle = ISO",
	"SET IntervalStyle = postgres",
	"SET extra_float_digits = 3",
	"SET statement_timeout = 0",
	"SET lock_timeout = 0",
	"SET default_transaction_isolation = 'read committed'",
	"SET idle_in_transaction_session_timeout = 0",
}

func newTargetSession(conn *pgx.Conn) *targetSession {
	return &targetSession{conn: conn, pg: conn.PgConn(), batch: &pgconn.Batch{}}
}

// setup prepares the session; origin is the replication origin to set up.
func (s *targetSession) setup(ctx context.Context, origin string) error {
	s.origin = origin
	for _, q := range sessionSetupSQL {
		if _, err := s.pg.Exec(ctx, q).ReadAll(); err != nil {
			return fmt.Errorf("setting up the target session (%s): %w", q, err)
		}
	}
	if err := state.SessionSetup(ctx, s.conn, origin); err != nil {
		return fmt.Errorf("setting up the target session: %w", err)
	}
	sd, err := s.prepare(ctx, state.XactSetupSQL, nil)
	if err != nil {
		return err
	}
	s.xactSetup = sd
	return nil
}

// prepare creates a named prepared statement. The caller drains a batch in
// flight first (the connection does one thing at a time).
func (s *targetSession) prepare(ctx context.Context, sql string, paramOIDs []uint32) (*pgconn.StatementDescription, error) {
	s.seq++
	sd, err := s.pg.Prepare(ctx, "walapply_"+strconv.Itoa(s.seq), sql, paramOIDs)
	if err != nil {
		return nil, fmt.Errorf("preparing %q on the target: %w", sql, err)
	}
	return sd, nil
}

// statementFor returns the prepared statement for sql, preparing it at
// once when the connection is idle. While a batch is in flight, preparing
// would mean waiting for it first (the connection does one thing at a
// time), and the target would sit idle while the next batch is built: the
// statement is then returned unprepared (an empty Name) and queueStmt
// parses it within the batch, until sendAsync, between reading one batch
// and sending the next, prepares it for good. The description is updated
// in place, so callers may cache it.
func (s *targetSession) statementFor(ctx context.Context, sql string, paramOIDs []uint32) (*pgconn.StatementDescription, error) {
	if !s.busy() {
		return s.prepare(ctx, sql, paramOIDs)
	}
	sd := &pgconn.StatementDescription{SQL: sql, ParamOIDs: paramOIDs}
	s.deferPrepare(sd)
	return sd, nil
}

func (s *targetSession) deferPrepare(sd *pgconn.StatementDescription) {
	if s.unprepared == nil {
		s.unprepared = map[*pgconn.StatementDescription]struct{}{}
	}
	s.unprepared[sd] = struct{}{}
}

// prepareDeferred prepares the statements statementFor handed out
// unprepared. The connection must be idle.
func (s *targetSession) prepareDeferred(ctx context.Context) error {
	for sd := range s.unprepared {
		p, err := s.prepare(ctx, sd.SQL, sd.ParamOIDs)
		if err != nil {
			return err
		}
		*sd = *p
		delete(s.unprepared, sd)
	}
	return nil
}

// begin queues the start of a target transaction. Deferred constraints are
// checked at once: a COMMIT must not fail after the origin's progress was
// set up, because on PostgreSQL 16+ an aborted transaction advances the
// origin too (see state's package doc).
func (s *targetSession) begin() {
	s.firstLSN = s.txnLSN
	s.queueSQL(opBegin, nil, "BEGIN")
	s.queueSQL(opBegin, nil, "SET CONSTRAINTS ALL IMMEDIATE")
}

func (s *targetSession) queueSQL(op opKind, rel *relmap.Entry, sql string) {
	s.batch.ExecParams(sql, nil, nil, nil, nil)
	s.queued = append(s.queued, queuedStmt{op: op, rel: rel, xid: s.txnXid, commitLSN: s.txnLSN, firstLSN: s.firstLSN})
	s.bytes += len(sql)
}

func (s *targetSession) queueStmt(op opKind, rel *relmap.Entry, sd *pgconn.StatementDescription, params [][]byte, formats []int16, keyStart, keyEnd int) {
	if sd.Name == "" { // not prepared yet (statementFor)
		s.batch.ExecParams(sd.SQL, params, sd.ParamOIDs, formats, nil)
		s.deferPrepare(sd) // again, if a failure dropped it
	} else {
		s.batch.ExecStatement(sd, params, formats, nil)
	}
	s.queued = append(s.queued, queuedStmt{op: op, rel: rel, sql: sd.SQL, keyStart: keyStart, keyEnd: keyEnd, xid: s.txnXid, commitLSN: s.txnLSN, firstLSN: s.firstLSN})
	for _, p := range params {
		s.bytes += len(p) + 8
	}
}

func (s *targetSession) full() bool {
	return len(s.queued) >= maxBatchStatements || s.bytes >= maxBatchBytes
}

// commitMark is the source position a batch commits, for the applier to
// record once the batch's results show it succeeded.
type commitMark struct {
	end   protocol.LSN
	at    protocol.Timestamp
	count int // source transactions committed
}

// inflight is a batch sent to the target whose results are not read yet:
// while the target executes it, the applier receives and prepares the next
// one (one-deep pipelining). A batch of several steps (with a COPY) runs on
// a goroutine of its own, stepRunner, instead of mrr.
type inflight struct {
	mrr    *pgconn.MultiResultReader
	steps  *stepRunner
	queued []queuedStmt
	keys   []byte
	mark   *commitMark
}

// flush sends the queued statements and reads their results (after those
// of a batch still in flight). On error it returns the failing statement
// (nil when the failure concerns the batch as a whole, e.g. a broken
// connection) and the error; the caller rolls back.
func (s *targetSession) flush(ctx context.Context) (*queuedStmt, error) {
	if q, err := s.drain(ctx); err != nil {
		return q, err
	}
	if err := s.prepareDeferred(ctx); err != nil {
		return nil, err
	}
	if len(s.queued) == 0 {
		return nil, nil
	}
	s.send(ctx, nil)
	return s.drain(ctx)
}

// sendAsync sends the queued statements without waiting for their results,
// after reading those of the batch before it (whose failure it returns).
func (s *targetSession) sendAsync(ctx context.Context, mark *commitMark) (*queuedStmt, error) {
	if q, err := s.drain(ctx); err != nil {
		return q, err
	}
	if err := s.prepareDeferred(ctx); err != nil {
		return nil, err
	}
	if len(s.queued) > 0 {
		s.send(ctx, mark)
	}
	return nil, nil
}

// send writes the batch and makes it the one in flight; the queue starts
// afresh, reusing the buffers of the batch before.
func (s *targetSession) send(ctx context.Context, mark *commitMark) {
	spareQueued, spareKeys := s.flying.queued[:0], s.flying.keys[:0]
	s.flying = inflight{queued: s.queued, keys: s.keys, mark: mark}
	if len(s.steps) == 0 {
		s.flying.mrr = s.pg.ExecBatch(ctx, s.batch)
	} else {
		s.closeBatch()
		s.flying.steps = runSteps(ctx, s.pg, s.steps)
		s.steps = nil
	}
	s.queued, s.keys = spareQueued, spareKeys
	s.batch = &pgconn.Batch{}
	s.bytes, s.closed = 0, 0
}

// busy reports whether a batch is in flight.
func (s *targetSession) busy() bool { return s.flying.mrr != nil || s.flying.steps != nil }

// drain reads the results of the batch in flight, if any. A commit it
// carried is appended to done.
func (s *targetSession) drain(ctx context.Context) (*queuedStmt, error) {
	f := &s.flying
	var o batchOutcome
	settle := func(i int, r stmtResult) {
		if i < len(f.queued) {
			s.noteResult(&o, &f.queued[i], f.keys, r)
		}
	}
	var n int
	var err error
	switch {
	case f.mrr != nil:
		mrr := f.mrr
		f.mrr = nil
		n, err = readBatch(mrr, settle)
	case f.steps != nil:
		var rs []stmtResult
		rs, err = f.steps.wait()
		f.steps = nil
		for i, r := range rs {
			settle(i, r)
		}
		n = len(rs)
	default:
		return nil, nil
	}
	if err != nil && o.err == nil {
		o.err = err
		if n < len(f.queued) {
			o.failed = &f.queued[n]
		}
	}
	if o.err != nil {
		if o.failed != nil {
			cp := *o.failed
			return &cp, o.err
		}
		return nil, o.err
	}
	if f.mark != nil {
		s.done = append(s.done, *f.mark)
		f.mark = nil
	}
	return nil, nil
}

// batchOutcome is the first failure among a batch's results.
type batchOutcome struct {
	failed *queuedStmt
	err    error
}

// noteResult checks one statement's result: the keys a self-recording
// statement returned are passed on, the first error is kept in o, and an
// UPDATE or DELETE that changed fewer rows than it should is reported.
func (s *stmtQueue) noteResult(o *batchOutcome, q *queuedStmt, keys []byte, r stmtResult) {
	if q.conflict != "" && s.conflicted != nil {
		for _, k := range r.conflicts {
			s.conflicted(q, k)
		}
	}
	short := r.err == nil && q.conflict == "" && (q.op == opUpdate || q.op == opDelete) && r.tag.RowsAffected() < int64(max(q.rows, 1))
	switch {
	case r.err != nil && o.err == nil:
		o.failed, o.err = q, r.err
	case short && s.missing != nil:
		s.missing(q, int(int64(max(q.rows, 1))-r.tag.RowsAffected()), string(keys[q.keyStart:q.keyEnd]))
	}
}

// reset drops the queue and forgets a batch in flight (after a failure).
func (s *targetSession) reset() {
	s.batch = &pgconn.Batch{}
	s.queued = s.queued[:0]
	s.bytes = 0
	s.keys = s.keys[:0]
	if s.flying.mrr != nil {
		_ = s.flying.mrr.Close()
	}
	if s.flying.steps != nil {
		s.flying.steps.wait()
	}
	s.steps, s.closed = nil, 0
	s.flying = inflight{queued: s.flying.queued[:0], keys: s.flying.keys[:0]}
	clear(s.unprepared) // queueStmt defers them again when next used
}

// rollback ends a failed or abandoned transaction. A broken connection has
// already lost it, which is just as good.
func (s *targetSession) rollback(ctx context.Context) error {
	s.reset()
	if s.pg.IsClosed() {
		return nil
	}
	_, err := s.pg.Exec(ctx, "ROLLBACK").ReadAll()
	if err != nil {
		return fmt.Errorf("rolling back the target transaction: %w", err)
	}
	return nil
}

// isConnClosed tells whether the error left the session unusable.
func (s *targetSession) broken(err error) bool {
	return s.pg.IsClosed() || errors.Is(err, context.Canceled)
}
