package apply

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/protocol"
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
)

var opNames = [...]string{"BEGIN", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "origin progress", "COMMIT"}

func (o opKind) String() string { return opNames[o] }

// queuedStmt remembers what a statement in the batch was for, so that its
// result can be checked and an error reported with the relation it concerns.
type queuedStmt struct {
	op        opKind
	rel       *relEntry
	keyStart  int // the row's key, rendered into targetSession.keys, for messages
	keyEnd    int
	xid       uint32       // the source transaction it belongs to
	commitLSN protocol.LSN // ... and its commit LSN
}

// targetSession is the connection that applies changes on the target. It
// queues statements into a pgconn.Batch, which encodes them at once (so the
// caller's buffers may be reused right away) and sends them in one round
// trip when flushed.
type targetSession struct {
	conn   *pgx.Conn
	pg     *pgconn.PgConn
	batch  *pgconn.Batch
	queued []queuedStmt
	bytes  int
	keys   []byte // rendered keys of queued UPDATE/DELETE statements
	seq    int    // prepared statement names

	xactSetup *pgconn.StatementDescription

	// missing is called for an UPDATE or DELETE that found no row.
	missing func(q *queuedStmt, key string)

	// txnXid and txnLSN name the source transaction whose statements are
	// being queued, for messages about them.
	txnXid uint32
	txnLSN protocol.LSN
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
	for _, q := range sessionSetupSQL {
		if _, err := s.pg.Exec(ctx, q).ReadAll(); err != nil {
			return fmt.Errorf("setting up the target session (%s): %w", q, err)
		}
	}
	if _, err := s.conn.Exec(ctx, "SELECT pg_catalog.pg_replication_origin_session_setup($1)", origin); err != nil {
		return fmt.Errorf("setting up replication origin %q on the target session: %w", origin, err)
	}
	sd, err := s.prepare(ctx, "SELECT pg_catalog.pg_replication_origin_xact_setup($1::pg_catalog.pg_lsn, $2::pg_catalog.timestamptz)", nil)
	if err != nil {
		return err
	}
	s.xactSetup = sd
	return nil
}

// prepare creates a named prepared statement.
func (s *targetSession) prepare(ctx context.Context, sql string, paramOIDs []uint32) (*pgconn.StatementDescription, error) {
	s.seq++
	sd, err := s.pg.Prepare(ctx, "walapply_"+strconv.Itoa(s.seq), sql, paramOIDs)
	if err != nil {
		return nil, fmt.Errorf("preparing %q on the target: %w", sql, err)
	}
	return sd, nil
}

// begin queues the start of a target transaction. Deferred constraints are
// checked at once: a COMMIT must not fail after the origin's progress was
// set up, because on PostgreSQL 16+ an aborted transaction advances the
// origin too (see state's package doc).
func (s *targetSession) begin() {
	s.queueSQL(opBegin, nil, "BEGIN")
	s.queueSQL(opBegin, nil, "SET CONSTRAINTS ALL IMMEDIATE")
}

func (s *targetSession) queueSQL(op opKind, rel *relEntry, sql string) {
	s.batch.ExecParams(sql, nil, nil, nil, nil)
	s.queued = append(s.queued, queuedStmt{op: op, rel: rel, xid: s.txnXid, commitLSN: s.txnLSN})
	s.bytes += len(sql)
}

func (s *targetSession) queueStmt(op opKind, rel *relEntry, sd *pgconn.StatementDescription, params [][]byte, formats []int16, keyStart, keyEnd int) {
	s.batch.ExecStatement(sd, params, formats, nil)
	s.queued = append(s.queued, queuedStmt{op: op, rel: rel, keyStart: keyStart, keyEnd: keyEnd, xid: s.txnXid, commitLSN: s.txnLSN})
	for _, p := range params {
		s.bytes += len(p) + 8
	}
}

func (s *targetSession) full() bool {
	return len(s.queued) >= maxBatchStatements || s.bytes >= maxBatchBytes
}

// flush sends the queued statements and reads their results. On error it
// returns the failing statement (nil when the failure concerns the batch as
// a whole, e.g. a broken connection) and the error; the caller rolls back.
func (s *targetSession) flush(ctx context.Context) (*queuedStmt, error) {
	if len(s.queued) == 0 {
		return nil, nil
	}
	mrr := s.pg.ExecBatch(ctx, s.batch)
	var failed *queuedStmt
	var firstErr error
	i := 0
	for mrr.NextResult() {
		tag, err := mrr.ResultReader().Close()
		if i < len(s.queued) {
			q := &s.queued[i]
			if err != nil && firstErr == nil {
				failed, firstErr = q, err
			} else if err == nil && (q.op == opUpdate || q.op == opDelete) && tag.RowsAffected() == 0 && s.missing != nil {
				s.missing(q, string(s.keys[q.keyStart:q.keyEnd]))
			}
		}
		i++
	}
	if err := mrr.Close(); err != nil && firstErr == nil {
		firstErr = err
		if i < len(s.queued) {
			failed = &s.queued[i]
		}
	}
	s.reset()
	if firstErr != nil {
		cp := queuedStmt{}
		if failed != nil {
			cp = *failed
			return &cp, firstErr
		}
		return nil, firstErr
	}
	return nil, nil
}

// reset drops the queue (after a flush or a failure).
func (s *targetSession) reset() {
	s.batch = &pgconn.Batch{}
	s.queued = s.queued[:0]
	s.bytes = 0
	s.keys = s.keys[:0]
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
