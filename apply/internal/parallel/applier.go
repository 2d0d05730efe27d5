package parallel

import (
	"context"

	"github.com/walapply/walapply/apply/internal/pipeline"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/protocol"
)

// Applier is what a worker needs of the applier of its own target
// connection, declared where it is used: package apply gives every worker
// one (an applier of its own, with its relation cache, prepared statements
// and batch, that runs no state machine: the run loop's has checked the
// framing); the tests use a recording fake. A worker calls it from its
// goroutine only, except MoveStats, which the run loop calls once the
// worker's commit or prepare has replied.
//
// Every call that can fail has already rolled the target transaction back
// and named the source transaction in its error, as the applier does for
// a failed transaction.
type Applier interface {
	// Begin starts the target transaction of source transaction xid, with
	// an empty net state (compaction). Its commit LSN is not known yet.
	Begin(xid uint32)
	// Decode decodes one message of a stream block as the run loop
	// received it.
	Decode(raw []byte) (protocol.Message, error)
	// PutRelation and PutType record a stream block's Relation and Type
	// messages in the relation cache.
	PutRelation(m *protocol.Relation)
	PutType(m *protocol.TypeMessage)
	// Holds reports whether the net state holds changes of relation rel.
	Holds(rel uint32) bool
	// Change adds an Insert, Update, Delete or Truncate to the net state.
	Change(ctx context.Context, msg protocol.Message) error
	// WriteOut queues the net state's statements and empties it.
	WriteOut(ctx context.Context) error
	// Discard empties the net state (rolled back to a savepoint).
	Discard()
	// QueueSQL queues a statement without parameters (savepoints).
	QueueSQL(op pipeline.Op, sql string)
	// Full reports whether the queue reached a batch's bounds.
	Full() bool
	// Send sends the queue without waiting, after the results of the
	// batch in flight are read.
	Send(ctx context.Context) error
	// MayCopy reports whether a long run of inserts may go by COPY now
	// (the applier's rule: no value check, no insert_exists policy).
	MayCopy() bool
	// Relation returns the mapping of relation rel for an insert.
	Relation(ctx context.Context, rel uint32) (*relmap.Entry, error)
	// QueueCopy queues a COPY of rows rows encoded in data into e.
	QueueCopy(e *relmap.Entry, sql string, data []byte, rows int64)
	// SetEnd names the commit or prepare LSN of the transaction, and the
	// run loop's progress, the position a rewind goes back to.
	SetEnd(lsn, applied protocol.LSN)
	// Commit writes out the net state and commits, the worker's origin
	// advanced to end inside the transaction; Prepare prepares it as gid.
	Commit(ctx context.Context, end protocol.LSN, at protocol.Timestamp) error
	Prepare(ctx context.Context, end protocol.LSN, at protocol.Timestamp, gid string) error
	// Rollback drops the queue and rolls the target transaction back.
	Rollback(ctx context.Context) error
	// Reset forgets the batch after a failure.
	Reset()
	// Lost reports whether the connection is lost.
	Lost() bool
	// MoveStats adds the worker's counters to the run loop's applier's;
	// DropStats forgets them (a transaction that did not commit).
	MoveStats()
	DropStats()
	// PID is the backend of the worker's connection; Cancel cancels the
	// statement it runs; Close closes it.
	PID() uint32
	Cancel(ctx context.Context) error
	Close(ctx context.Context)
}
