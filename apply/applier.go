package apply

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"
	"github.com/walapply/walapply/apply/internal/compact"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/state"
)

// ErrNotSupported is returned for stream features this build does not apply.
var ErrNotSupported = errors.New("apply: not supported")

// Stats counts what the applier did. Fields are updated atomically so that
// metrics and progress callbacks may read them from other goroutines.
type Stats struct {
	TxnsApplied atomic.Int64
	TxnsSkipped atomic.Int64 // already applied before a restart
	Commits     atomic.Int64 // target transactions committed (group commit folds several source transactions into one)
	Inserts     atomic.Int64
	CopiedRows  atomic.Int64 // of Inserts, sent with COPY (stream_copy.go, target_copy.go)
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
	sess    target     // the applying connection (applier_target.go)
	queue   *stmtQueue // sess's bookkeeping of its queue
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

	// filteredOut: the copy filter skipped a change of the open target
	// transaction, which may then hold no write of its own; commit makes
	// it write, since a commit without an xid does not advance the origin.
	filteredOut bool

	// group commit (group.go) and net-effect compaction (internal/compact)
	net            *compact.Compactor
	compaction     bool
	grouping       bool
	noGroupThrough protocol.LSN // no grouping for transactions up to this commit LSN
	group          txnGroup
	groupMaxWait   time.Duration
	now            time.Time // the run loop's clock for the message at hand (SetClock)

	// conflict handling (conflict.go)
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
	a := &applier{log: log, machine: newTxnMachine(), rels: relmap.NewCache(binary), sess: sess, queue: sess.queue(), applied: applied, net: compact.New()}
	a.queue.missing = a.rowMissing
	a.queue.conflicted = a.conflicted
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
		a.queue.txnXid, a.queue.txnLSN = b.Xid, b.FinalLSN
		a.txn.userSkip = !a.txn.skip && a.skipMatches(b.FinalLSN)
		if !a.txn.skip && a.group.count == 0 {
			a.sess.begin()
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
		if a.sess.full() || a.checks(msg) { // valuecheck.go
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

// commit queues the origin advance and COMMIT of the open target
// transaction, sends everything and records the new progress. Source
// transactions grouped into the target transaction are committed with it.
func (a *applier) commit(ctx context.Context, end protocol.LSN, at protocol.Timestamp) error {
	if err := a.writeOut(ctx); err != nil {
		return a.fail(ctx, err)
	}
	n := a.group.count + 1
	if a.filteredOut {
		// Assigns the transaction an xid: PostgreSQL writes no commit
		// record, and so does not advance the origin, for a transaction
		// that wrote nothing (every change filtered out).
		a.sess.queueSQL(opOrigin, nil, "SELECT pg_catalog.txid_current()")
		a.filteredOut = false
	}
	// The progress is set up last, right before COMMIT: on PostgreSQL 16+
	// a transaction that aborts after it still advances the origin.
	a.queueOriginAdvance(end, at)
	a.sess.queueSQL(opCommit, nil, "COMMIT")
	a.group = txnGroup{}
	// Sent without waiting: the target executes it while the next
	// messages are received and queued. Its result is read before the
	// next batch goes out (Settle), and only then does it count as applied.
	if failed, err := a.sess.sendAsync(ctx, &commitMark{end: end, at: at, count: n}); err != nil {
		return a.failStmt(ctx, failed, err)
	}
	a.collect()
	return nil
}

// Settle waits for the batch in flight and records the commit it carried.
// The connection is then free for other statements.
func (a *applier) Settle(ctx context.Context) error {
	if failed, err := a.sess.drain(ctx); err != nil {
		return a.failStmt(ctx, failed, err)
	}
	a.collect()
	return nil
}

// collect records the commits that drained batches confirmed.
func (a *applier) collect() {
	for _, m := range a.queue.done {
		a.Stats.Commits.Add(1)
		a.noteApplied(m.end, m.at)
		a.outcome.Count += m.count
		a.Stats.TxnsApplied.Add(int64(m.count - 1))
	}
	a.queue.done = a.queue.done[:0]
}

// noteApplied records that the source transaction ending at end is now
// committed (or prepared) on the target.
func (a *applier) noteApplied(end protocol.LSN, at protocol.Timestamp) {
	a.applied, a.appliedTime = end, at
	a.Stats.TxnsApplied.Add(1)
	a.outcome.Applied, a.outcome.End = true, end
}

// noteSkipped records that a source transaction was already applied.
func (a *applier) noteSkipped() {
	a.Stats.TxnsSkipped.Add(1)
	a.outcome.Skipped = true
}

// queueOriginAdvance records the source position inside the target
// transaction, so the commit and the progress are one atomic fact.
func (a *applier) queueOriginAdvance(end protocol.LSN, at protocol.Timestamp) {
	a.params = state.AppendXactSetupArgs(a.params[:0], end, at.Time())
	a.formats = append(a.formats[:0], 0, 0)
	a.sess.queueStmt(opOrigin, nil, a.queue.xactSetup, a.params, a.formats, 0, 0)
}

// Abandon rolls back a transaction in progress (on shutdown): nothing of it
// was committed, and the source resends it.
func (a *applier) Abandon(ctx context.Context) error {
	if (!a.machine.InTransaction() || a.txn.skip) && a.group.count == 0 && !a.sess.busy() {
		return nil
	}
	a.machine.Reset()
	a.group = txnGroup{}
	a.net = compact.New()
	return a.sess.rollback(ctx)
}

func (a *applier) fail(ctx context.Context, err error) error {
	var te *TxnError
	if !errors.As(err, &te) {
		te = &TxnError{Xid: a.txn.xid, CommitLSN: a.txn.finalLSN, Err: err}
		err = te
	}
	if a.group.count > 0 && te.CommitLSN != a.group.firstLSN {
		te.Grouped = true
	}
	a.skipHint(te)
	a.group = txnGroup{}
	a.queue.done = a.queue.done[:0]
	a.net = compact.New()
	a.filteredOut = false
	if rbErr := a.sess.rollback(ctx); rbErr != nil && !a.sess.broken(rbErr) {
		a.log.Warn().Err(rbErr).Msg("rolling back after a failed transaction")
	}
	return err
}

func (a *applier) failStmt(ctx context.Context, q *queuedStmt, err error) error {
	err = a.failQueued(ctx, q, err)
	if q != nil && q.op == opCommit {
		// The origin was set up and then the COMMIT failed: on PostgreSQL
		// 16+ the abort advanced the origin (state's package doc).
		if rerr := a.rewindOrigin(ctx, "", false); rerr != nil {
			return rerr
		}
	}
	return err
}

// failQueued is failStmt without the rewind: it names the transaction and
// statement of q in err and rolls back.
func (a *applier) failQueued(ctx context.Context, q *queuedStmt, err error) error {
	err = withColumn(q, err) // name the column of a rejected value (errdetail.go)
	te := &TxnError{Xid: a.txn.xid, CommitLSN: a.txn.finalLSN, Err: asConflictError(err)}
	te.vague = unchecked(q, err) // Run's retry checks the value (valuecheck.go)
	if q != nil {
		te.otherUnique = isOtherUnique(q.rel, err)
	}
	if q != nil {
		if q.xid != 0 {
			te.Xid, te.CommitLSN = q.xid, q.commitLSN
		}
		// Only a failure in a later transaction of a group makes the
		// group matter for the retry (see Run).
		te.Grouped = q.commitLSN != q.firstLSN
		te.Op = q.op.String()
		if q.rel != nil {
			te.Relation = q.rel.String()
		}
	}
	return a.fail(ctx, te)
}

// rowMissing logs an UPDATE or DELETE that found no row; like PostgreSQL's
// subscriber, it is skipped (update_missing / delete_missing).
func (a *applier) rowMissing(q *queuedStmt, n int, key string) {
	a.Stats.MissingRows.Add(int64(n))
	kind := "update_missing"
	if q.op == opDelete {
		kind = "delete_missing"
	}
	for i := 0; i < n; i++ {
		a.Stats.Conflicts.Add(kind)
	}
	if q.rows > 1 {
		key = fmt.Sprintf("%d of the %d rows with keys %s", n, q.rows, key)
	}
	a.log.Warn().Str("conflict", kind).Str("relation", q.rel.LogName()).Str("key", key).
		Uint32("xid", q.xid).Stringer("commit_lsn", q.commitLSN).
		Msg("row to change not found on the target; skipped")
}

// changeNet folds a change into the net state of the group when that is
// safe (internal/compact), and otherwise queues it as it comes.
func (a *applier) changeNet(ctx context.Context, msg protocol.Message) error {
	if !a.compaction || !a.grouping || a.machine.state != stateInTxn || a.txn.finalLSN <= a.noGroupThrough {
		return a.change(ctx, msg)
	}
	var relid uint32
	switch m := msg.(type) {
	case *protocol.Insert:
		relid = m.RelationID
	case *protocol.Update:
		relid = m.RelationID
	case *protocol.Delete:
		relid = m.RelationID
	default: // TRUNCATE: everything pending goes first
		if err := a.writeOut(ctx); err != nil {
			return err
		}
		return a.change(ctx, msg)
	}
	e, err := a.relation(ctx, relid, opOf(msg.Type()))
	if err != nil {
		return err
	}
	if !compactable(e, a.policies) {
		// Applied in order; other tables' pending rows may come later,
		// which nothing can tell apart on the replica session.
		return a.change(ctx, msg)
	}
	if a.net.Add(e, msg) {
		if a.net.N >= compact.MaxRows || len(a.net.Arena) >= maxBatchBytes {
			return a.writeOut(ctx)
		}
		return nil
	}
	if err := a.writeOut(ctx); err != nil {
		return err
	}
	return a.change(ctx, msg)
}

// change queues one DML message.
func (a *applier) change(ctx context.Context, msg protocol.Message) error {
	switch m := msg.(type) {
	case *protocol.Insert:
		return a.insert(ctx, m)
	case *protocol.Update:
		return a.update(ctx, m)
	case *protocol.Delete:
		return a.delete(ctx, m)
	case *protocol.Truncate:
		return a.truncate(ctx, m)
	}
	return orderError("unexpected change message %s", msg.Type())
}

// checkWidth checks that a tuple of an op's message (which: "new" or
// "old"; "" for an INSERT's only one) has its Relation message's width.
func checkWidth(e *relmap.Entry, t *protocol.TupleData, op opKind, which string) error {
	if len(t.Columns) != len(e.Rel.Columns) {
		if which != "" {
			which += " "
		}
		return orderError("%s on %s: its %stuple has %d columns, its Relation message %d", op, e, which, len(t.Columns), len(e.Rel.Columns))
	}
	return nil
}

// addParam appends one column value as a statement parameter.
func (a *applier) addParam(c *protocol.TupleColumn) {
	switch c.Kind {
	case protocol.ColumnText:
		a.params = append(a.params, c.Data)
		a.formats = append(a.formats, 0)
	case protocol.ColumnBinary:
		a.params = append(a.params, c.Data)
		a.formats = append(a.formats, 1)
	default: // NULL, or an unchanged TOAST value in an INSERT (treated as NULL, as PostgreSQL does)
		a.params = append(a.params, nil)
		a.formats = append(a.formats, 0)
	}
}

func (a *applier) insert(ctx context.Context, m *protocol.Insert) error {
	e, err := a.relation(ctx, m.RelationID, opInsert)
	if err != nil {
		return err
	}
	if err := checkWidth(e, &m.New, opInsert, ""); err != nil {
		return err
	}
	a.params, a.formats = a.params[:0], a.formats[:0]
	for i := range e.Rel.Columns {
		if e.Tcol[i] >= 0 {
			a.addParam(&m.New.Columns[i])
		}
	}
	sd, err := a.statement(ctx, e, 'I', nil, nil, false)
	if err != nil {
		return err
	}
	keyStart := len(a.queue.keys)
	if c, _ := a.wraps('I'); c != "" {
		a.queue.keys = a.renderTupleKey(a.queue.keys, e, &m.New)
	}
	a.queueRow(opInsert, 'I', e, sd, keyStart)
	a.Stats.Inserts.Add(1)
	return nil
}

// locator returns the tuple that locates the row of an UPDATE or DELETE:
// the old key ('K') or old row ('O') when sent, else the new tuple (the key
// did not change). It also says whether the identity is FULL.
func (a *applier) locator(e *relmap.Entry, op opKind, oldKind byte, old, new *protocol.TupleData) (*protocol.TupleData, bool, error) {
	full := e.Rel.ReplicaIdentity == protocol.ReplicaIdentityFull
	if !full && len(e.Key) == 0 {
		return nil, false, &TxnError{Xid: a.txn.xid, CommitLSN: a.txn.finalLSN, Relation: e.String(), Op: op.String(),
			Err: &SchemaError{Relation: e.String(), Problem: "the source relation has no replica identity, so its rows cannot be located",
				Hint: "give the source table a primary key or REPLICA IDENTITY FULL"}}
	}
	src := new
	if oldKind != 0 {
		src = old
	}
	if err := checkWidth(e, src, op, "old"); err != nil {
		return nil, false, err
	}
	return src, full, nil
}

func (a *applier) update(ctx context.Context, m *protocol.Update) error {
	e, err := a.relation(ctx, m.RelationID, opUpdate)
	if err != nil {
		return err
	}
	if err := checkWidth(e, &m.New, opUpdate, "new"); err != nil {
		return err
	}
	src, full, err := a.locator(e, opUpdate, m.OldKind, &m.Old, &m.New)
	if err != nil {
		return err
	}
	kind := byte('U')
	if a.policies[ConflictUpdateExists] != PolicyError && keyMoves(e, m) {
		if err := a.queueUpdateExists(ctx, e, m); err != nil {
			return err
		}
		if a.policies[ConflictUpdateExists] == PolicySkip {
			kind = 'G'
		}
	}
	a.params, a.formats = a.params[:0], a.formats[:0]
	for i := range e.Rel.Columns {
		if e.Tcol[i] >= 0 && m.New.Columns[i].Kind != protocol.ColumnUnchanged {
			a.addParam(&m.New.Columns[i])
		}
	}
	keyStart := len(a.queue.keys)
	match := a.matchColumns(e, src, full)
	if kind == 'G' {
		for _, i := range e.Key {
			a.addParam(&m.New.Columns[i])
		}
	}
	sd, err := a.statement(ctx, e, kind, &m.New, match, full)
	if err != nil {
		return err
	}
	a.queueRow(opUpdate, kind, e, sd, keyStart)
	a.Stats.Updates.Add(1)
	return nil
}

func (a *applier) delete(ctx context.Context, m *protocol.Delete) error {
	e, err := a.relation(ctx, m.RelationID, opDelete)
	if err != nil {
		return err
	}
	src, full, err := a.locator(e, opDelete, m.OldKind, &m.Old, &m.Old)
	if err != nil {
		return err
	}
	a.params, a.formats = a.params[:0], a.formats[:0]
	keyStart := len(a.queue.keys)
	match := a.matchColumns(e, src, full)
	sd, err := a.statement(ctx, e, 'D', nil, match, full)
	if err != nil {
		return err
	}
	a.queueRow(opDelete, 'D', e, sd, keyStart)
	a.Stats.Deletes.Add(1)
	return nil
}

// matchColumns appends the locating values to the parameters, renders the
// key for messages, and returns which source columns locate the row.
func (a *applier) matchColumns(e *relmap.Entry, src *protocol.TupleData, full bool) []int {
	use := a.matchIdx[:0]
	if full {
		for i := range e.Rel.Columns {
			if e.Tcol[i] >= 0 && src.Columns[i].Kind != protocol.ColumnUnchanged {
				use = append(use, i)
			}
		}
	} else {
		use = append(use, e.Key...)
	}
	keys := a.queue.keys
	for n, i := range use {
		c := &src.Columns[i]
		a.addParam(c)
		if n > 0 {
			keys = append(keys, ", "...)
		}
		keys = append(keys, e.Rel.Columns[i].Name...)
		keys = append(keys, '=')
		keys = appendValue(keys, c)
	}
	a.queue.keys = keys
	a.matchIdx = use
	return use
}

// appendValue renders a value for a log message, shortened.
func appendValue(dst []byte, c *protocol.TupleColumn) []byte {
	const max = 64
	switch c.Kind {
	case protocol.ColumnNull:
		return append(dst, "NULL"...)
	case protocol.ColumnUnchanged:
		return append(dst, "(unchanged)"...)
	case protocol.ColumnBinary:
		dst = append(dst, "\\x"...)
		const hexdigits = "0123456789abcdef"
		for i, b := range c.Data {
			if i == max/2 {
				return append(dst, "..."...)
			}
			dst = append(dst, hexdigits[b>>4], hexdigits[b&15])
		}
		return dst
	}
	if len(c.Data) > max {
		dst = append(dst, c.Data[:max]...)
		return append(dst, "..."...)
	}
	return append(dst, c.Data...)
}

func (a *applier) truncate(ctx context.Context, m *protocol.Truncate) error {
	tables := make([]string, 0, len(m.RelationIDs))
	only := make([]bool, 0, len(m.RelationIDs))
	var first *relmap.Entry
	for _, id := range m.RelationIDs {
		e, err := a.relation(ctx, id, opTruncate)
		if err != nil {
			return err
		}
		if first == nil {
			first = e
		}
		tables = append(tables, e.Target.Quoted)
		only = append(only, !e.Target.Partition)
	}
	if len(tables) == 0 {
		return nil
	}
	sql := sqlgen.Truncate(tables, only, m.Options&protocol.TruncateCascade != 0, m.Options&protocol.TruncateRestartIdentity != 0)
	a.sess.queueSQL(opTruncate, first, sql)
	a.Stats.Truncates.Add(1)
	return nil
}
