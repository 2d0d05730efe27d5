package engine

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/apply/internal/pipeline"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/protocol"
)

// Target is what the applier needs of the applying connection, declared
// where it is used: statements are queued (with their bookkeeping in the
// shared pipeline.StmtQueue), sent as a batch and drained; a few calls (two-phase
// outcomes, the origin's repair, a streamed COPY) run outside a batch.
// *pipeline.Session (internal/pipeline) is the real one, a pipelined pgx session; the
// engine's transcript tests use a recording fake (engine_fake_test.go).
//
// Only the hot path's calls are per change (queueStmt, full); an
// implementation must not allocate in them once warm (TestAllocs).
type Target interface {
	// Queue returns the bookkeeping of the statements queued and in
	// flight; the applier renders keys into it and names the source
	// transaction its statements belong to.
	Queue() *pipeline.StmtQueue

	// Begin queues the start of a target transaction.
	Begin()
	// QueueSQL queues a statement without parameters.
	QueueSQL(op pipeline.Op, rel *relmap.Entry, sql string)
	// QueueStmt queues a prepared statement (or one StatementFor handed
	// out unprepared) with its parameters, which it copies.
	QueueStmt(op pipeline.Op, rel *relmap.Entry, sd *pgconn.StatementDescription, params [][]byte, formats []int16, keyStart, keyEnd int)
	// QueueExec queues sql with parameters of the given types, unprepared,
	// remembered as q; it does not count towards the batch's size.
	QueueExec(q pipeline.Stmt, sql string, params [][]byte, oids []uint32, formats []int16)
	// QueueCopy queues a COPY of data into rel (internal/pipeline/copy.go).
	QueueCopy(rel *relmap.Entry, sql string, data []byte)
	// Full reports whether the queue reached a batch's bounds.
	Full() bool
	// Busy reports whether a batch is in flight.
	Busy() bool

	// SendAsync sends the queue as a batch without waiting, after draining
	// the one in flight; mark is recorded in done once the batch is drained.
	SendAsync(ctx context.Context, mark *pipeline.CommitMark) (*pipeline.Stmt, error)
	// Drain reads the results of the batch in flight; it returns the
	// failed statement (nil for the batch as a whole) with the error.
	Drain(ctx context.Context) (*pipeline.Stmt, error)
	// Flush sends the queue and drains it.
	Flush(ctx context.Context) (*pipeline.Stmt, error)
	// Rollback drops the queue and rolls the target transaction back.
	Rollback(ctx context.Context) error
	// Broken reports whether err left the connection unusable.
	Broken(err error) bool
	// Lost reports whether the connection is lost.
	Lost() bool

	// Prepare prepares sql now; StatementFor prepares it when the
	// connection is idle, else hands it out unprepared (internal/pipeline).
	Prepare(ctx context.Context, sql string, paramOIDs []uint32) (*pgconn.StatementDescription, error)
	StatementFor(ctx context.Context, sql string, paramOIDs []uint32) (*pgconn.StatementDescription, error)

	// Exec runs sql at once, outside a batch.
	Exec(ctx context.Context, sql string) error
	// CopyFrom runs a COPY ... FROM STDIN at once, reading its data from r.
	CopyFrom(ctx context.Context, r io.Reader, sql string) error
	// IsPrepared reports whether gid is prepared on the target.
	IsPrepared(ctx context.Context, gid string) (bool, error)
	// XactSetupIfPrepared sets the origin's progress up for the next
	// statement if gid is prepared, and reports whether it is.
	XactSetupIfPrepared(ctx context.Context, end protocol.LSN, at time.Time, gid string) (bool, error)
	// XactReset clears an origin setup left on the session.
	XactReset(ctx context.Context) error
	// OriginName is the replication origin set up on the session ("" if none).
	OriginName() string
	// RewindOrigin moves the origin back to to; it returns where it was.
	RewindOrigin(ctx context.Context, to protocol.LSN) (protocol.LSN, error)
	// Catalog looks tables up on this connection (when there is no
	// control connection; the caller drains first).
	Catalog() relmap.Catalog
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
