package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"
	"github.com/walapply/walapply/apply/internal/compact"
	"github.com/walapply/walapply/apply/internal/pipeline"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/protocol"
)

// openTxn is the source transaction being applied.
type openTxn struct {
	xid        uint32
	finalLSN   protocol.LSN
	commitTime protocol.Timestamp
	skip       bool   // already applied: its end LSN is at or below the origin's progress
	userSkip   bool   // named by --skip-lsn: committed empty, with the origin moved past it
	origin     string // from an Origin message, if any
}

// Applier turns decoded messages into SQL on the target. It is fed one
// message at a time by the run loop; see the package doc for the design.
type Applier struct {
	log     zerolog.Logger
	machine *Machine
	rels    *relmap.Cache
	sess    Target              // the applying connection (applier_target.go)
	queue   *pipeline.StmtQueue // sess's bookkeeping of its queue
	txn     openTxn

	// applied is the end LSN of the last source transaction whose target
	// commit was issued: the origin's progress once that commit is flushed.
	applied     protocol.LSN
	appliedTime protocol.Timestamp
	// outcome of the last Handle, for the run loop's FlushTracker
	outcome Outcome
	stream  streamState   // streamed transactions (stream.go)
	copied  *CopyFilter   // changes the tables' initial copies hold (loaded by apply/copy_filter.go)
	watch   *TableWatch   // the tables it knows, for tables published later (table_watch.go)
	tp      twoPhaseState // two-phase transactions (prepare.go)
	Stats   Stats

	// group commit (Group, group.go) and net-effect compaction (internal/compact)
	net            *compact.Compactor
	compaction     bool
	grouping       bool
	noGroupThrough protocol.LSN // no grouping for transactions up to this commit LSN
	group          Group
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
	// catalog lookups (controlCatalog) and table_watch.go's records; else the
	// applying one is used. tables, when set, is used for lookups instead.
	catalog *pgx.Conn
	tables  relmap.Catalog

	ddl *DDLState // --ddl (ddl_apply.go); nil without
}

// New returns an applier writing through sess, which must already be
// set up, configured by cfg; applied is the origin's progress on the target.
func New(log zerolog.Logger, sess Target, cfg Options, applied protocol.LSN) *Applier {
	a := &Applier{log: log, machine: NewMachine(), rels: relmap.NewCache(cfg.Binary), sess: sess, queue: sess.Queue(), applied: applied, net: compact.New()}
	a.queue.Missing = a.rowMissing
	a.queue.Conflicted = a.conflicted
	a.grouping, a.noGroupThrough, a.groupMaxWait = cfg.Grouping, cfg.NoGroupThrough, cfg.GroupMaxWait
	a.compaction = cfg.Compaction
	a.name, a.policies, a.skipLSN = cfg.Name, cfg.Policies, cfg.SkipLSN
	if a.policies == nil {
		a.policies = defaultPolicies()
	}
	return a
}

// Applied returns the end LSN of the last applied source transaction, the
// origin's progress once its commit is durable, and its commit time.
func (a *Applier) Applied() (protocol.LSN, protocol.Timestamp) { return a.applied, a.appliedTime }

// InTransaction reports whether a source transaction is being applied.
func (a *Applier) InTransaction() bool { return a.machine.InTransaction() }

// Handle applies one message. The returned event tells the caller what the
// message was, and the outcome what it did to transactions (the run loop
// keeps its FlushTracker with it). After an error the applier must be
// discarded: the target transaction has been rolled back and the source
// must resend from the origin's progress.
func (a *Applier) Handle(ctx context.Context, msg protocol.Message) (Event, Outcome, error) {
	a.outcome = Outcome{}
	ev, err := a.handle(ctx, msg)
	return ev, a.outcome, err
}

// handle is Handle; what it does to transactions accumulates in a.outcome.
func (a *Applier) handle(ctx context.Context, msg protocol.Message) (Event, error) {
	ev, err := a.machine.Step(msg)
	if err != nil {
		return ev, err
	}
	if rel, ok := msg.(*protocol.Relation); ok {
		// Before anything of its transaction touches the table, also
		// inside a stream block (table_watch.go).
		if err := a.watch.check(ctx, a, rel); err != nil {
			return ev, err
		}
	}
	if ev.NeedsOwnTransaction() {
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
	case EvNone:
	case EvMessage:
		return ev, a.ddlMessage(ctx, msg.(*protocol.LogicalMessage)) // ddl_apply.go
	case EvRelation:
		rel := *msg.(*protocol.Relation)
		if a.net.HasRelation(rel.RelationID) {
			if err := a.writeOut(ctx); err != nil {
				return ev, a.fail(ctx, err)
			}
		}
		a.rels.PutRelation(&rel)
	case EvType:
		a.rels.PutType(msg.(*protocol.TypeMessage))
	case EvOrigin:
		a.txn.origin = msg.(*protocol.Origin).Name
	case EvBegin:
		b := msg.(*protocol.Begin)
		a.txn = openTxn{xid: b.Xid, finalLSN: b.FinalLSN, commitTime: b.CommitTime, skip: AlreadyApplied(b.FinalLSN, a.applied)}
		a.outcome.Began = true
		a.queue.TxnXid, a.queue.TxnLSN = b.Xid, b.FinalLSN
		a.txn.userSkip = !a.txn.skip && a.skipMatches(b.FinalLSN)
		if !a.txn.skip && a.group.Count == 0 {
			a.sess.Begin()
		}
	case EvChange:
		if a.txn.skip || a.txn.userSkip {
			return ev, nil
		}
		if diverted, err := a.watch.divert(a, msg); diverted || err != nil {
			return ev, err // set aside while its table is copied (table_sync.go)
		}
		if msg = a.copied.Filter(a.rels, a.txn.xid, a.txn.finalLSN, msg); msg == nil {
			return ev, nil // the table's initial copy holds it (CopyFilter)
		}
		if err := a.changeNet(ctx, msg); err != nil {
			return ev, a.fail(ctx, err)
		}
		if a.sess.Full() || a.checks(msg) { // valuecheck.go
			if failed, err := a.flushChange(ctx, msg); err != nil {
				return ev, a.failStmt(ctx, failed, err)
			}
		}
	case EvCommit:
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
	case EvStreamStart, EvStreamStop, EvStreamChange, EvStreamCommit, EvStreamAbort:
		return ev, a.handleStream(ctx, ev, msg)
	case EvBeginPrepare, EvPrepare, EvCommitPrepared, EvRollbackPrepared, EvStreamPrepare:
		return ev, a.handleTwoPhase(ctx, ev, msg)
	default:
		return ev, fmt.Errorf("%w: %s messages", ErrNotSupported, msg.Type())
	}
	return ev, nil
}
