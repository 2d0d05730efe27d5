package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

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
	MaxBatchStatements = 1000
	MaxBatchBytes      = 4 << 20
)

// Op is what a queued statement does.
type Op uint8

const (
	OpBegin Op = iota
	OpInsert
	OpUpdate
	OpDelete
	OpTruncate
	OpOrigin
	OpCommit
	OpCopy // a run of inserts sent with COPY (copy.go)
)

// opNames spell the kinds as apply's Op constants do (apply/internal/engine/ops.go;
// TestOpNames holds them equal).
var opNames = [...]string{"BEGIN", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "origin progress", "COMMIT", "INSERT (COPY)"}

func (o Op) String() string { return opNames[o] }

// Stmt remembers what a statement in the batch was for, so that its
// result can be checked and an error reported with the relation it concerns.
type Stmt struct {
	Op        Op
	Rel       *relmap.Entry
	SQL       string // the statement's SQL, for Rel.Params
	KeyStart  int    // the row's key, rendered into StmtQueue.Keys, for messages
	KeyEnd    int
	Xid       uint32       // the source transaction it belongs to
	CommitLSN protocol.LSN // ... and its commit LSN
	// FirstLSN is the commit LSN of the first source transaction in the
	// same target transaction (group commit): when it differs from
	// CommitLSN, a failure rolls back earlier source transactions too.
	FirstLSN protocol.LSN
	// Rows is how many rows a multi-row UPDATE or DELETE should change
	// (0 means 1).
	Rows int
	// Conflict names the conflict kind the statement records itself
	// (apply's conflict_sql.go): its result rows are the keys that conflicted.
	Conflict string
}

// Session is the connection that applies changes on the target. It
// queues statements into a pgconn.Batch, which encodes them at once (so the
// caller's buffers may be reused right away) and sends them in one round
// trip when flushed.
type Session struct {
	StmtQueue // what the queued statements are for (queue.go)

	conn  *pgx.Conn
	pg    *pgconn.PgConn
	batch *pgconn.Batch
	bytes int
	seq   int // prepared statement names

	origin string   // the replication origin set up on the session
	flying inflight // the batch sent and not yet read

	// steps are the parts of the queue before batch when it holds a COPY
	// (copy.go); closed counts the queued statements they hold.
	steps  []sendStep
	closed int

	// unprepared are statements handed out by StatementFor while a batch
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

// New returns the session on conn; Setup prepares it.
func New(conn *pgx.Conn) *Session {
	return &Session{conn: conn, pg: conn.PgConn(), batch: &pgconn.Batch{}}
}

// Setup prepares the session; origin is the replication origin to set up.
func (s *Session) Setup(ctx context.Context, origin string) error {
	s.origin = origin
	// One round trip for all of them (a start makes a few dozen; this
	// was ten). On a failure they run again one by one, so that the
	// error names the setting the target refused.
	if _, err := s.pg.Exec(ctx, strings.Join(sessionSetupSQL, "; ")).ReadAll(); err != nil {
		for _, q := range sessionSetupSQL {
			if _, err := s.pg.Exec(ctx, q).ReadAll(); err != nil {
				return fmt.Errorf("setting up the target session (%s): %w", q, err)
			}
		}
		return fmt.Errorf("setting up the target session: %w", err)
	}
	if err := state.SessionSetup(ctx, s.conn, origin); err != nil {
		return fmt.Errorf("setting up the target session: %w", err)
	}
	sd, err := s.Prepare(ctx, state.XactSetupSQL, nil)
	if err != nil {
		return err
	}
	s.XactSetup = sd
	return nil
}

// Prepare creates a named prepared statement. The caller drains a batch in
// flight first (the connection does one thing at a time).
func (s *Session) Prepare(ctx context.Context, sql string, paramOIDs []uint32) (*pgconn.StatementDescription, error) {
	s.seq++
	sd, err := s.pg.Prepare(ctx, "walapply_"+strconv.Itoa(s.seq), sql, paramOIDs)
	if err != nil {
		return nil, fmt.Errorf("preparing %q on the target: %w", sql, err)
	}
	return sd, nil
}

// StatementFor returns the prepared statement for sql, preparing it at
// once when the connection is idle. While a batch is in flight, preparing
// would mean waiting for it first (the connection does one thing at a
// time), and the target would sit idle while the next batch is built: the
// statement is then returned unprepared (an empty Name) and QueueStmt
// parses it within the batch, until SendAsync, between reading one batch
// and sending the next, prepares it for good. The description is updated
// in place, so callers may cache it.
func (s *Session) StatementFor(ctx context.Context, sql string, paramOIDs []uint32) (*pgconn.StatementDescription, error) {
	if !s.Busy() {
		return s.Prepare(ctx, sql, paramOIDs)
	}
	sd := &pgconn.StatementDescription{SQL: sql, ParamOIDs: paramOIDs}
	s.deferPrepare(sd)
	return sd, nil
}

func (s *Session) deferPrepare(sd *pgconn.StatementDescription) {
	if s.unprepared == nil {
		s.unprepared = map[*pgconn.StatementDescription]struct{}{}
	}
	s.unprepared[sd] = struct{}{}
}

// prepareDeferred prepares the statements StatementFor handed out
// unprepared. The connection must be idle.
func (s *Session) prepareDeferred(ctx context.Context) error {
	for sd := range s.unprepared {
		p, err := s.Prepare(ctx, sd.SQL, sd.ParamOIDs)
		if err != nil {
			return err
		}
		*sd = *p
		delete(s.unprepared, sd)
	}
	return nil
}

// Begin queues the start of a target transaction. Deferred constraints are
// checked at once: a COMMIT must not fail after the origin's progress was
// set up, because on PostgreSQL 16+ an aborted transaction advances the
// origin too (see state's package doc).
func (s *Session) Begin() {
	s.FirstLSN = s.TxnLSN
	s.QueueSQL(OpBegin, nil, "BEGIN")
	s.QueueSQL(OpBegin, nil, "SET CONSTRAINTS ALL IMMEDIATE")
}

func (s *Session) QueueSQL(op Op, rel *relmap.Entry, sql string) {
	s.batch.ExecParams(sql, nil, nil, nil, nil)
	s.Queued = append(s.Queued, Stmt{Op: op, Rel: rel, Xid: s.TxnXid, CommitLSN: s.TxnLSN, FirstLSN: s.FirstLSN})
	s.bytes += len(sql)
}

func (s *Session) QueueStmt(op Op, rel *relmap.Entry, sd *pgconn.StatementDescription, params [][]byte, formats []int16, keyStart, keyEnd int) {
	if sd.Name == "" { // not prepared yet (StatementFor)
		s.batch.ExecParams(sd.SQL, params, sd.ParamOIDs, formats, nil)
		s.deferPrepare(sd) // again, if a failure dropped it
	} else {
		s.batch.ExecStatement(sd, params, formats, nil)
	}
	s.Queued = append(s.Queued, Stmt{Op: op, Rel: rel, SQL: sd.SQL, KeyStart: keyStart, KeyEnd: keyEnd, Xid: s.TxnXid, CommitLSN: s.TxnLSN, FirstLSN: s.FirstLSN})
	for _, p := range params {
		s.bytes += len(p) + 8
	}
}

func (s *Session) Full() bool {
	return len(s.Queued) >= MaxBatchStatements || s.bytes >= MaxBatchBytes
}

// CommitMark is the source position a batch commits, for the applier to
// record once the batch's results show it succeeded.
type CommitMark struct {
	End   protocol.LSN
	At    protocol.Timestamp
	Count int // source transactions committed
}

// inflight is a batch sent to the target whose results are not read yet:
// while the target executes it, the applier receives and prepares the next
// one (one-deep pipelining). A batch of several steps (with a COPY) runs on
// a goroutine of its own, stepRunner, instead of mrr.
type inflight struct {
	mrr    *pgconn.MultiResultReader
	steps  *stepRunner
	queued []Stmt
	keys   []byte
	mark   *CommitMark
}

// Flush sends the queued statements and reads their results (after those
// of a batch still in flight). On error it returns the failing statement
// (nil when the failure concerns the batch as a whole, e.g. a broken
// connection) and the error; the caller rolls back.
func (s *Session) Flush(ctx context.Context) (*Stmt, error) {
	if q, err := s.Drain(ctx); err != nil {
		return q, err
	}
	if err := s.prepareDeferred(ctx); err != nil {
		return nil, err
	}
	if len(s.Queued) == 0 {
		return nil, nil
	}
	s.send(ctx, nil)
	return s.Drain(ctx)
}

// SendAsync sends the queued statements without waiting for their results,
// after reading those of the batch before it (whose failure it returns).
func (s *Session) SendAsync(ctx context.Context, mark *CommitMark) (*Stmt, error) {
	if q, err := s.Drain(ctx); err != nil {
		return q, err
	}
	if err := s.prepareDeferred(ctx); err != nil {
		return nil, err
	}
	if len(s.Queued) > 0 {
		s.send(ctx, mark)
	}
	return nil, nil
}

// send writes the batch and makes it the one in flight; the queue starts
// afresh, reusing the buffers of the batch before.
func (s *Session) send(ctx context.Context, mark *CommitMark) {
	spareQueued, spareKeys := s.flying.queued[:0], s.flying.keys[:0]
	s.flying = inflight{queued: s.Queued, keys: s.Keys, mark: mark}
	if len(s.steps) == 0 {
		s.flying.mrr = s.pg.ExecBatch(ctx, s.batch)
	} else {
		s.closeBatch()
		s.flying.steps = runSteps(ctx, s.pg, s.steps)
		s.steps = nil
	}
	s.Queued, s.Keys = spareQueued, spareKeys
	s.batch = &pgconn.Batch{}
	s.bytes, s.closed = 0, 0
}

// Busy reports whether a batch is in flight.
func (s *Session) Busy() bool { return s.flying.mrr != nil || s.flying.steps != nil }

// Drain reads the results of the batch in flight, if any. A commit it
// carried is appended to done.
func (s *Session) Drain(ctx context.Context) (*Stmt, error) {
	f := &s.flying
	var o BatchOutcome
	settle := func(i int, r Result) {
		if i < len(f.queued) {
			s.NoteResult(&o, &f.queued[i], f.keys, r)
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
		var rs []Result
		rs, err = f.steps.wait()
		f.steps = nil
		for i, r := range rs {
			settle(i, r)
		}
		n = len(rs)
	default:
		return nil, nil
	}
	if err != nil && o.Err == nil {
		o.Err = err
		if n < len(f.queued) {
			o.Failed = &f.queued[n]
		}
	}
	if o.Err != nil {
		if o.Failed != nil {
			cp := *o.Failed
			return &cp, o.Err
		}
		return nil, o.Err
	}
	if f.mark != nil {
		s.Done = append(s.Done, *f.mark)
		f.mark = nil
	}
	return nil, nil
}

// BatchOutcome is the first failure among a batch's results.
type BatchOutcome struct {
	Failed *Stmt
	Err    error
}

// NoteResult checks one statement's result: the keys a self-recording
// statement returned are passed on, the first error is kept in o, and an
// UPDATE or DELETE that changed fewer rows than it should is reported.
func (s *StmtQueue) NoteResult(o *BatchOutcome, q *Stmt, keys []byte, r Result) {
	if q.Conflict != "" && s.Conflicted != nil {
		for _, k := range r.Conflicts {
			s.Conflicted(q, k)
		}
	}
	short := r.Err == nil && q.Conflict == "" && (q.Op == OpUpdate || q.Op == OpDelete) && r.Tag.RowsAffected() < int64(max(q.Rows, 1))
	switch {
	case r.Err != nil && o.Err == nil:
		o.Failed, o.Err = q, r.Err
	case short && s.Missing != nil:
		s.Missing(q, int(int64(max(q.Rows, 1))-r.Tag.RowsAffected()), string(keys[q.KeyStart:q.KeyEnd]))
	}
}

// Reset drops the queue and forgets a batch in flight (after a failure).
func (s *Session) Reset() {
	s.batch = &pgconn.Batch{}
	s.Queued = s.Queued[:0]
	s.bytes = 0
	s.Keys = s.Keys[:0]
	if s.flying.mrr != nil {
		_ = s.flying.mrr.Close()
	}
	if s.flying.steps != nil {
		s.flying.steps.wait()
	}
	s.steps, s.closed = nil, 0
	s.flying = inflight{queued: s.flying.queued[:0], keys: s.flying.keys[:0]}
	clear(s.unprepared) // QueueStmt defers them again when next used
}

// Rollback ends a failed or abandoned transaction. A broken connection has
// already lost it, which is just as good.
func (s *Session) Rollback(ctx context.Context) error {
	s.Reset()
	if s.pg.IsClosed() {
		return nil
	}
	_, err := s.pg.Exec(ctx, "ROLLBACK").ReadAll()
	if err != nil {
		return fmt.Errorf("rolling back the target transaction: %w", err)
	}
	return nil
}

// Broken tells whether err left the session unusable: its connection closed, or the context cancelled.
func (s *Session) Broken(err error) bool {
	return s.pg.IsClosed() || errors.Is(err, context.Canceled)
}
