package apply

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"
	"github.com/walapply/walapply/apply/internal/compact"
	"github.com/walapply/walapply/apply/internal/pipeline"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/protocol"
)

// Stats counts what the applier did. Fields are updated atomically so that
// metrics and progress callbacks may read them from other goroutines.
type Stats struct {
	TxnsApplied atomic.Int64
	TxnsSkipped atomic.Int64 // already applied before a restart
	Commits     atomic.Int64 // target transactions committed (group commit folds several source transactions into one)
	Inserts     atomic.Int64
	CopiedRows  atomic.Int64 // of Inserts, sent with COPY (stream_copy.go, internal/pipeline/copy.go)
	Updates     atomic.Int64
	Deletes     atomic.Int64
	Truncates   atomic.Int64
	MissingRows atomic.Int64 // UPDATE/DELETE that found no row (logged and skipped)
	// ParallelApplied counts streamed transactions applied as they
	// streamed, ParallelFallbacks those that fell back to the spill path
	// (stream_parallel.go).
	ParallelApplied   atomic.Int64
	ParallelFallbacks atomic.Int64
	// Conflicts counts conflicts by kind (observe.go).
	Conflicts ConflictStats
}

// openTxn is the source transaction being applied.
type openTxn struct {
	xid        uint32
	finalLSN   protocol.LSN
	commitTime protocol.Timestamp
	skip       bool   // already applied: its end LSN is at or below the origin's progress
	userSkip   bool   // named by --skip-lsn: committed empty, with the origin moved past it
	origin     string // from an Origin message, if any
}

// alreadyApplied is the one rule (DESIGN.md invariant 1) by which every path
// (Begin, Stream Commit, Begin Prepare / Stream Prepare, Commit and Rollback
// Prepared) recognises a source transaction applied before a restart. at is
// a position inside the record that ends the transaction on the source: its
// start (Begin's final LSN, Stream Commit's commit LSN, the prepare LSN), or,
// for a message that only carries the record's end, that end minus one.
// origin is the origin's progress, the end LSN of the last transaction
// applied. Source records do not overlap, so the transaction was applied
// exactly when its end record starts before that end: at < origin.
//
// A two-phase transaction before the origin may still have to be applied
// (prepared before two-phase decoding began on the slot): the prepare path
// asks the target whether its GID is prepared (startPrepared). A different
// rule, per table, decides which changes a table's initial copy already
// holds (copy_filter.go): it compares with the copy's snapshot point and
// xids, not with the origin, and drops changes, not whole transactions.
func alreadyApplied(at, origin protocol.LSN) bool { return at < origin }

// applier turns decoded messages into SQL on the target. It is fed one
// message at a time by the run loop; see the package doc for the design.
type applier struct {
	log     zerolog.Logger
	machine *txnMachine
	rels    *relmap.Cache
	sess    target              // the applying connection (applier_target.go)
	queue   *pipeline.StmtQueue // sess's bookkeeping of its queue
	txn     openTxn

	// applied is the end LSN of the last source transaction whose target
	// commit was issued: the origin's progress once that commit is flushed.
	applied     protocol.LSN
	appliedTime protocol.Timestamp
	// outcome of the last Handle, for the run loop's FlushTracker
	outcome outcome
	stream  streamState   // streamed transactions (stream.go)
	copied  *copyFilter   // changes the tables' initial copies hold (copy_filter.go)
	watch   *tableWatch   // the tables it knows, for tables published later (refresh.go)
	tp      twoPhaseState // two-phase transactions (prepare.go)
	Stats   Stats

	// group commit (group.go) and net-effect compaction (internal/compact)
	net            *compact.Compactor
	compaction     bool
	grouping       bool
	noGroupThrough protocol.LSN // no grouping for transactions up to this commit LSN
	group          txnGroup
	groupMaxWait   time.Duration
	now            time.Time // the run loop's clock for the message at hand (SetClock)

	// conflict handling (conflict.go, conflict_sql.go)
	name      string
	policies  ConflictPolicies
	recordBuf []byte
	// --skip-lsn (skip.go): the commit LSN of the transaction to skip, 0
	// once used or when none; the flag's LSN when it was found used (or
	// was spent in this session); the xid of the transaction it skipped.
	skipLSN     protocol.LSN
	skipIgnored protocol.LSN
	skippedXid  uint32

	// reusable per-change buffers: no allocation per row once warm
	params   [][]byte
	formats  []int16
	matchIdx []int
	shape    []byte
	// the packed arrays of the array row source (internal/compact/rows.go)
	arrayBuf  []byte
	arrayEnds []int

	// catalog, when set, is the session's control connection, for
	// catalog lookups (controlCatalog) and refresh.go's records; else the
	// applying one is used. tables, when set, is used for lookups instead.
	catalog *pgx.Conn
	tables  relmap.Catalog

	ddl *ddlState // --ddl (ddl_apply.go); nil without
}

// newApplier returns an applier writing through sess, which must already be
// set up; applied is the origin's progress on the target.
func newApplier(log zerolog.Logger, sess target, binary bool, applied protocol.LSN) *applier {
	a := &applier{log: log, machine: newTxnMachine(), rels: relmap.NewCache(binary), sess: sess, queue: sess.Queue(), applied: applied, net: compact.New()}
	a.queue.Missing = a.rowMissing
	a.queue.Conflicted = a.conflicted
	a.policies = defaultPolicies()
	return a
}

// Applied returns the end LSN of the last applied source transaction, the
// origin's progress once its commit is durable, and its commit time.
func (a *applier) Applied() (protocol.LSN, protocol.Timestamp) { return a.applied, a.appliedTime }

// InTransaction reports whether a source transaction is being applied.
func (a *applier) InTransaction() bool { return a.machine.InTransaction() }

// Handle applies one message. The returned event tells the caller what the
// message was, and the outcome what it did to transactions (the run loop
// keeps its FlushTracker with it). After an error the applier must be
// discarded: the target transaction has been rolled back and the source
// must resend from the origin's progress.
func (a *applier) Handle(ctx context.Context, msg protocol.Message) (event, outcome, error) {
	a.outcome = outcome{}
	ev, err := a.handle(ctx, msg)
	return ev, a.outcome, err
}

// handle is Handle; what it does to transactions accumulates in a.outcome.
func (a *applier) handle(ctx context.Context, msg protocol.Message) (event, error) {
	ev, err := a.machine.Step(msg)
	if err != nil {
		return ev, err
	}
	if rel, ok := msg.(*protocol.Relation); ok {
		// Before anything of its transaction touches the table, also
		// inside a stream block (refresh.go).
		if err := a.watch.check(ctx, a, rel); err != nil {
			return ev, err
		}
	}
	if ev.needsOwnTransaction() {
		// Step has already opened the new transaction; the group ended
		// with the previous message. Its work, and the batch in flight,
		// must be done before the connection is used for anything else.
		if err := a.commitGroup(ctx); err != nil {
			return ev, err
		}
		if err := a.Settle(ctx); err != nil {
			return ev, err
		}
	}
	switch ev {
	case evNone:
	case evMessage:
		return ev, a.ddlMessage(ctx, msg.(*protocol.LogicalMessage)) // ddl_apply.go
	case evRelation:
		rel := *msg.(*protocol.Relation)
		if a.net.HasRelation(rel.RelationID) {
			if err := a.writeOut(ctx); err != nil {
				return ev, a.fail(ctx, err)
			}
		}
		a.rels.PutRelation(&rel)
	case evType:
		a.rels.PutType(msg.(*protocol.TypeMessage))
	case evOrigin:
		a.txn.origin = msg.(*protocol.Origin).Name
	case evBegin:
		b := msg.(*protocol.Begin)
		a.txn = openTxn{xid: b.Xid, finalLSN: b.FinalLSN, commitTime: b.CommitTime, skip: alreadyApplied(b.FinalLSN, a.applied)}
		a.outcome.Began = true
		a.queue.TxnXid, a.queue.TxnLSN = b.Xid, b.FinalLSN
		a.txn.userSkip = !a.txn.skip && a.skipMatches(b.FinalLSN)
		if !a.txn.skip && a.group.count == 0 {
			a.sess.Begin()
		}
	case evChange:
		if a.txn.skip || a.txn.userSkip {
			return ev, nil
		}
		if diverted, err := a.watch.divert(a, msg); diverted || err != nil {
			return ev, err // set aside while its table is copied (refresh_sync.go)
		}
		if msg = a.copied.filter(a, msg); msg == nil {
			return ev, nil // the table's initial copy holds it (copy_filter.go)
		}
		if err := a.changeNet(ctx, msg); err != nil {
			return ev, a.fail(ctx, err)
		}
		if a.sess.Full() || a.checks(msg) { // valuecheck.go
			if failed, err := a.flushChange(ctx, msg); err != nil {
				return ev, a.failStmt(ctx, failed, err)
			}
		}
	case evCommit:
		c := msg.(*protocol.Commit)
		if a.txn.skip {
			a.noteSkipped()
			return ev, nil
		}
		if a.txn.userSkip {
			a.recordUserSkip()
		} else {
			a.notePassed(a.txn.finalLSN)
		}
		if err := a.endGrouped(ctx, c.EndLSN, c.CommitTime); err != nil {
			return ev, err
		}
	case evStreamStart, evStreamStop, evStreamChange, evStreamCommit, evStreamAbort:
		return ev, a.handleStream(ctx, ev, msg)
	case evBeginPrepare, evPrepare, evCommitPrepared, evRollbackPrepared, evStreamPrepare:
		return ev, a.handleTwoPhase(ctx, ev, msg)
	default:
		return ev, fmt.Errorf("%w: %s messages", ErrNotSupported, msg.Type())
	}
	return ev, nil
}

// outcome tells the run loop what a step of the applier (Handle, Idle,
// CommitAndSettle) did to transactions, so that it can keep the
// FlushTracker balanced: every Began is followed by
// exactly one Applied, Skipped or Ended. A message that both starts and
// ends a transaction on the target (Stream Commit, Commit Prepared,
// Rollback Prepared) sets Began as well as its end.
type outcome struct {
	Began   bool         // a source transaction started
	Applied bool         // ... and was committed or prepared on the target, ending at End
	Skipped bool         // ... and was skipped as already applied (DESIGN.md invariant 1)
	Ended   bool         // ... and ended with nothing to commit on the target
	End     protocol.LSN // with Applied: the source end LSN recorded in the origin
	// Count is how many source transactions the Applied commit covered
	// (group commit); 0 means 1.
	Count int
}
