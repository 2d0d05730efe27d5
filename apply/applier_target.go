package apply

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/protocol"
)

// target is what the applier needs of the applying connection, declared
// where it is used: statements are queued (with their bookkeeping in the
// shared stmtQueue), sent as a batch and drained; a few calls (two-phase
// outcomes, the origin's repair, a streamed COPY) run outside a batch.
// *targetSession (target.go) is the real one, a pipelined pgx session; the
// engine's transcript tests use a recording fake (engine_fake_test.go).
//
// Only the hot path's calls are per change (queueStmt, full); an
// implementation must not allocate in them once warm (TestAllocs).
type target interface {
	// queue returns the bookkeeping of the statements queued and in
	// flight; the applier renders keys into it and names the source
	// transaction its statements belong to.
	queue() *stmtQueue

	// begin queues the start of a target transaction.
	begin()
	// queueSQL queues a statement without parameters.
	queueSQL(op opKind, rel *relmap.Entry, sql string)
	// queueStmt queues a prepared statement (or one statementFor handed
	// out unprepared) with its parameters, which it copies.
	queueStmt(op opKind, rel *relmap.Entry, sd *pgconn.StatementDescription, params [][]byte, formats []int16, keyStart, keyEnd int)
	// queueExec queues sql with parameters of the given types, unprepared,
	// remembered as q; it does not count towards the batch's size.
	queueExec(q queuedStmt, sql string, params [][]byte, oids []uint32, formats []int16)
	// queueCopy queues a COPY of data into rel (target_copy.go).
	queueCopy(rel *relmap.Entry, sql string, data []byte)
	// full reports whether the queue reached a batch's bounds.
	full() bool
	// busy reports whether a batch is in flight.
	busy() bool

	// sendAsync sends the queue as a batch without waiting, after draining
	// the one in flight; mark is recorded in done once the batch is drained.
	sendAsync(ctx context.Context, mark *commitMark) (*queuedStmt, error)
	// drain reads the results of the batch in flight; it returns the
	// failed statement (nil for the batch as a whole) with the error.
	drain(ctx context.Context) (*queuedStmt, error)
	// flush sends the queue and drains it.
	flush(ctx context.Context) (*queuedStmt, error)
	// rollback drops the queue and rolls the target transaction back.
	rollback(ctx context.Context) error
	// broken reports whether err left the connection unusable.
	broken(err error) bool
	// lost reports whether the connection is lost.
	lost() bool

	// prepare prepares sql now; statementFor prepares it when the
	// connection is idle, else hands it out unprepared (target.go).
	prepare(ctx context.Context, sql string, paramOIDs []uint32) (*pgconn.StatementDescription, error)
	statementFor(ctx context.Context, sql string, paramOIDs []uint32) (*pgconn.StatementDescription, error)

	// exec runs sql at once, outside a batch.
	exec(ctx context.Context, sql string) error
	// copyFrom runs a COPY ... FROM STDIN at once, reading its data from r.
	copyFrom(ctx context.Context, r io.Reader, sql string) error
	// isPrepared reports whether gid is prepared on the target.
	isPrepared(ctx context.Context, gid string) (bool, error)
	// xactSetupIfPrepared sets the origin's progress up for the next
	// statement if gid is prepared, and reports whether it is.
	xactSetupIfPrepared(ctx context.Context, end protocol.LSN, at time.Time, gid string) (bool, error)
	// xactReset clears an origin setup left on the session.
	xactReset(ctx context.Context) error
	// originName is the replication origin set up on the session ("" if none).
	originName() string
	// rewindOrigin moves the origin back to to; it returns where it was.
	rewindOrigin(ctx context.Context, to protocol.LSN) (protocol.LSN, error)
	// catalog looks tables up on this connection (when there is no
	// control connection; the caller drains first).
	catalog() relmap.Catalog
}

// stmtQueue is the bookkeeping a target keeps of its queue, shared by its
// implementations: what each queued statement was for, the keys rendered
// for messages, the source transaction being queued, and the commits that
// drained batches confirmed.
type stmtQueue struct {
	queued []queuedStmt
	keys   []byte // rendered keys of queued UPDATE/DELETE statements

	// txnXid and txnLSN name the source transaction whose statements are
	// being queued, for messages about them.
	txnXid   uint32
	txnLSN   protocol.LSN
	firstLSN protocol.LSN // of the target transaction's first source transaction

	done []commitMark // commits confirmed by drain, for the applier

	// xactSetup is the prepared origin advance (state.XactSetupSQL).
	xactSetup *pgconn.StatementDescription

	// missing is called for an UPDATE or DELETE that found no row.
	missing func(q *queuedStmt, n int, key string)
	// conflicted is called for each key a self-recording statement
	// returns (see queuedStmt.conflict).
	conflicted func(q *queuedStmt, key string)
}

// last returns the statement queued last.
func (s *stmtQueue) last() *queuedStmt { return &s.queued[len(s.queued)-1] }

// queryCatalog looks tables up with q's queries, e.g. on the applying
// connection.
type queryCatalog struct{ q relmap.Querier }

func (c queryCatalog) LookupTable(ctx context.Context, schema, name string) (*relmap.Table, bool, error) {
	return relmap.LookupTable(ctx, c.q, schema, name)
}

// controlCatalog looks tables up through the session's control connection,
// so that the applying session keeps its batch in flight: a lookup there
// would first wait for the target to finish it, and the target would then
// sit idle while the next batch is built (once per table, but on a backlog
// over many tables that was a stall per table). The lookup runs read-only
// with the applying session's search_path, so type names read the same on
// both (error messages are matched against them).
type controlCatalog struct{ conn *pgx.Conn }

func (c controlCatalog) LookupTable(ctx context.Context, schema, name string) (t *relmap.Table, found bool, err error) {
	err = pgx.BeginTxFunc(ctx, c.conn, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL search_path = pg_catalog"); err != nil {
			return fmt.Errorf("reading the target catalog: %w", err)
		}
		var err error
		t, found, err = relmap.LookupTable(ctx, tx, schema, name)
		return err
	})
	return t, found, err
}
