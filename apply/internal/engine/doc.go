// Package engine is the applier: it takes decoded pgoutput messages, one at
// a time, decides what each means and what to do, and returns what a step
// did to transactions; it talks to the target only through Target (the
// applying connection: queue a statement or a COPY, send, drain, roll
// back, the two-phase and origin calls) and to the catalog through
// relmap.Catalog. Package apply is the run loop around it, which owns the
// connections, feeds it messages and acts on its outcomes (see apply/doc.go
// for the design of the whole).
//
// The pure decisions: Machine checks the framing of the decoded message
// stream and says what each message means (an Event); AlreadyApplied is
// the one rule that recognises a source transaction applied before a
// restart; Outcome is what a step of the applier did to transactions, for
// the run loop's FlushTracker, with the rule by which a two-phase step
// folds its end into it (Outcome.FoldApplied); OriginTracker tells, from
// the events, which origin the last transaction came from; CopyFilter
// drops the changes a table's initial copy, made in a later snapshot,
// already holds; Group decides where a group of source transactions
// sharing one target transaction ends.
//
// The applier (Applier, New, configured by Options): applier.go (its state
// and Handle's dispatch), applier_loop.go (what the run loop asks of it
// besides Handle), applier_commit.go (commit, Settle, applied and
// skipped), applier_fail.go (a failed transaction rolled back),
// applier_group.go (group commit), applier_conflict.go and conflict_sql.go
// (conflicts: counted, logged, a change's statement wrapped by its policy),
// changes.go (a change queued as its statement), statements.go (a change's
// prepared statement), relcache.go (relation lookups), valuecheck.go and
// column_error.go (the checked retry: which column a rejected value is
// in), rewind.go (the origin moved back after a failed COMMIT or PREPARE),
// skip.go (--skip-lsn), compact_apply.go, compact_write.go and
// compact_keyed.go (compaction's write-out; the net state is
// internal/compact's), stream*.go (streamed transactions: spilled and
// replayed, or applied as they stream by the workers of internal/parallel),
// prepare.go and prepare_apply.go (two-phase transactions), ddl_apply.go
// and ddl_source.go (--ddl), table_watch.go and table_sync.go (tables
// published later, copied in the background while the others are
// applied), applier_target.go (Target, and the catalog on the control
// connection).
//
// What it reports in: Stats, TxnError, PermanentError, SchemaError,
// ConflictError, DDLError, SpillError, the conflict kinds and policies and
// the operation names (apply shows them under the same names, as aliases),
// and Transient, the rule of which errors a reconnect can cure. What it
// needs of the session beyond the target: a Dialer for its own
// connections, and the hooks SetParallel, SetStream, Attach and
// TableWatch.SetStart give it.
//
// Its tests need no server: TestTranscripts (testdata/engine/*.txt) and
// TestParallelTranscripts (testdata/parallel/*.txt) feed messages in the
// notation of protocol's transcript tests to an applier over a recording
// fake target (engine_fake_test.go) and compare the SQL, commit marks and
// outcomes; TestAllocs measures the hot path.
package engine
