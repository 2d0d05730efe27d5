// Package apply replays a source's logical replication stream onto a target
// database: the heart of walapply.
//
// # Design
//
// What it guarantees is what PostgreSQL's own apply worker (worker.c)
// guarantees: every source transaction is applied exactly once, atomically,
// in the source's commit order, and a crash of the applier, the target or the
// source loses nothing. How it gets there differs, because walapply is a
// client of the target, not a process inside it.
//
// Exactly once. The source sends a transaction only after it commits (or, for
// streamed and two-phase transactions, when it ends or prepares), as Begin,
// changes, Commit. walapply turns it into one target transaction and, inside
// that same transaction, records the source commit's end LSN in a replication
// origin on the target (pg_replication_origin_xact_setup). The commit and the
// progress are therefore one atomic fact: after any crash the origin's
// progress names exactly the last source transaction that is on the target.
// On start, streaming resumes from there; a transaction whose commit record
// starts before that position is recognised and skipped if the source sends
// it again. There is no local state file to get out of step with the target.
//
// Nothing confirmed before it is durable. The target commits asynchronously
// (synchronous_commit = off: a commit costs no disk wait), so a committed
// transaction may still be lost if the target crashes. The position confirmed
// to the source must never pass such a transaction, or the source would
// recycle WAL that is still needed. pg_replication_origin_progress(origin,
// true) flushes the target's WAL up to the origin's latest commit and returns
// that commit's source position, which is then safe to confirm. The run loop
// asks for it once per feedback interval on a separate control connection;
// state.FlushTracker combines it with what has been received to decide the
// write, flush and apply positions sent to the source.
//
// One statement per change, few round trips. The changes of a transaction
// are prepared statements (one per relation and shape: an UPDATE that leaves
// unchanged TOAST columns out of its SET list has a different shape) queued
// into a batch that goes to the target in one round trip at commit, or
// earlier when it reaches a size bound, so memory stays bounded however large
// the transaction. Values travel as the source sent them, text or binary,
// never parsed here; parameters are typed with the target column's type, so
// the target parses them exactly as it would parse its own input.
//
// Fewer statements than changes. PostgreSQL's apply worker changes heap and
// indexes directly; an external applier pays for SQL: bind, plan and
// executor start-up per statement, and a round trip per batch. Winning that
// back is doing less per change on the target, so consecutive small source
// transactions share one target transaction (engine.Group), a group's changes
// are reduced to their net effect per row (internal/compact), and each
// table's net inserts, updates and deletes become one statement each whose
// rows arrive as binary text[] parameters (internal/compact/rows.go),
// except a long run of inserts, which goes as one COPY
// (internal/pipeline/copy.go): the target then writes rows to the heap many
// at a time, and an inserted row costs it about a third less; the rows of
// an update or delete come in key order (internal/compact/order.go), so the
// target's index lookups stay on neighbouring pages. Groups and write-outs
// are large (10,000 transactions, 20,000 rows), since the cost that remains
// is per statement, and target connections use generic plans
// (plan_cache_mode), so a statement is planned once, not at every
// execution. The target executes one batch while the next is received and
// built (internal/pipeline, one-deep pipelining); nothing on the hot path
// may wait for the target without need: new statements are prepared between
// batches, catalog lookups use the control connection, and a quiet stream
// commits the open group without waiting for its result. The receive loop
// keeps one context for the session and moves only a socket deadline
// (loop.go): a context per message cost more than receiving it; and the
// replication connection keeps the walsender's TCP window closed while the
// walsender is behind (on loopback a small receive buffer; after a read
// that emptied the socket, a pause of 12 ms before the next read,
// spent in one nanosleep(2) with the socket's low-water mark raised rather than
// on a Go timer; protocol/coalesce.go), because every send into an open
// window is a segment of its own, and on loopback the sending side pays for
// each. That holds on a busy machine too (issue 17): without the pause, or
// with a large receive buffer, the walsender spent up to three times the
// CPU; and waiting in the kernel stopped the Go poller's wake-up per
// arriving segment, which had cost walapply up to half its CPU.
//
// Where the time goes, on two cores: the walsender, walapply and the target
// backend share them, and on a backlog all three are busy, so CPU saved
// anywhere is time saved; the harness (bench/) reports each one's CPU per
// drain next to the wall time.
//
// Matching PostgreSQL's subscriber. Tables are found by schema and name,
// columns by name; extra target columns keep their defaults, generated
// target columns are not written, identity columns take the source's
// values (OVERRIDING SYSTEM VALUE; an UPDATE cannot set a GENERATED ALWAYS
// one, which PostgreSQL allows only to DEFAULT, so a table updated on the
// source needs GENERATED BY DEFAULT there). UPDATE and DELETE find the row by the
// replica identity; with REPLICA IDENTITY FULL by all columns, through the
// text form for types without an equality operator, changing exactly one row
// even when duplicates exist. The session runs with session_replication_role
// = replica, so ordinary triggers and foreign keys do not fire. An UPDATE or
// DELETE that finds no row is logged and skipped; a duplicate key on INSERT
// stops with an error, with nothing of the transaction applied.
//
// Errors. Any failure inside a transaction rolls the target transaction back,
// so nothing of it is applied and nothing is confirmed. Transient failures
// (lost connections, server restarts, serialization failures) are retried
// after reconnecting, with exponential backoff, from the origin's durable
// progress; permanent ones stop the run with an error naming the relation,
// the operation, the source transaction and what to do.
//
// Structure. The applier is package internal/engine. engine.Machine, fed
// one decoded message at a time, checks the framing (transactions, stream
// blocks, prepared transactions) and says what the message means (an
// engine.Event); engine.Applier acts on events against a target
// (engine.Target, the small interface it needs of the applying connection,
// and relmap.Catalog for table lookups) and returns what each step did to
// transactions (an engine.Outcome). This package is the run loop around
// it, which owns the connections: the session (run.go, loop.go) feeds it
// messages; its settings are an engine.Options (engineConfigOf,
// session_engine.go), the connections it makes beside the applying one go
// through an engine.Dialer (configDialer), and where a step needs the
// session's I/O (the --skip-lsn record, the two-phase set-up, the spill
// directory, a background copy's catch-up) the session does the I/O and
// the applier the applying (session_*.go, refresh*.go). The types users
// see (Stats, TxnError, the conflict policies, the operation names, the
// error kinds) are the engine's, under aliases in types.go; IsTransient
// is engine.Transient with the session's own cases. The engine's
// decisions are tested without a server: TestTranscripts feeds messages
// to the applier over a recording fake target
// (internal/engine/testdata/engine/*.txt), TestAllocs measures its hot
// path.
//
// # Glossary
//
// One word per concept; the code uses them in these senses only.
//
//   - change: one Insert, Update, Delete or Truncate of a source transaction.
//   - statement: SQL queued for the target (one per change, or one per
//     table and kind after compaction, or one COPY).
//   - batch: the statements sent to the target in one round trip
//     (pipeline.Session). At most one batch is in flight; the next is built
//     while the target executes it.
//   - send: write the queued statements as a batch without waiting
//     (SendAsync). drain: read the results of the batch in flight. flush:
//     send and drain, so that the target has executed everything queued
//     (pipeline.Session.Flush, for a batch that is full or must be known
//     done, e.g. PREPARE TRANSACTION). Two other uses are not walapply's
//     words but their owners': the flush position of a standby status
//     update (PostgreSQL's: what is durable, FlushTracker.Feedback), and
//     state.SpillFile.Flush (bufio's: buffered bytes written to the file).
//   - settle: drain and record the commits the batch carried as applied
//     (engine.Applier.Settle). A commit counts as applied only once settled.
//   - group: source transactions folded into one target transaction
//     (engine.Group; the applier's side in internal/engine/applier_group.go); a group of one is an ordinary transaction.
//   - commit: queue the origin advance and COMMIT of the target
//     transaction and send them without waiting (the engine's
//     Applier.commit, commitGroup). CommitAndSettle commits and waits until settled.
//   - write-out: turning the net state compaction holds into statements,
//     queued (internal/engine/compact_write.go); a group writes out before its commit, and
//     earlier when it holds too many rows or a message needs the table.
//   - idle: the stream is quiet (no message at hand); engine.Applier.Idle
//     takes one step towards nothing pending. Between transactions is "no
//     transaction" (engine.Machine); no transaction open and everything
//     applied durable is FlushTracker.AllDurable.
//   - applied: committed (or prepared) on the target and settled: the
//     origin's progress once durable (engine.Applier.Applied). durable: confirmed
//     by pg_replication_origin_progress(origin, true); only that is
//     confirmed to the source (state.FlushTracker).
//   - already applied: at or before the origin's progress, by the one rule
//     engine.AlreadyApplied; such a transaction is skipped.
//   - session: a run's connections from connect to the first error
//     (session, run.go); the target session is the applying connection
//     (pipeline.Session), whose replication origin is set up on it
//     (state.SessionSetup).
//
// # Files
//
//   - Run loop: run.go (sessions, connect, retry), connect_target.go (a
//     session's connections opened at once), loop.go (receive,
//     feedback, outcome tracking), keepalive.go, lease.go (one process per
//     applier: takeLease and dropLease, functions of the control
//     connection, outside the file cycle), until.go (--until), wait.go (Start, Runner), observe.go,
//     config.go.
//   - The applier's side, in this package: session_engine.go (what the
//     session hands the engine: engineConfigOf, configDialer),
//     session_skip.go (--skip-lsn's record read; engine.Applier.ArmSkip
//     decides), session_twophase.go, session_stream.go, session_ddl.go
//     (their set-up at connect), origin_filter.go (--origin checked;
//     engine.OriginTracker reports it), types.go (the engine's types under
//     apply's names), registry.go (the walapply schema;
//     registry.Register), registry_read.go (ReadRegistered, for walapply
//     status), errors.go (the run loop's sentinels, IsTransient,
//     asPermanent), errdetail.go (TLS failures).
//   - Packages under internal/ (no cycles between them and apply): engine
//     (the applier; its package doc has the file map),
//     pipeline (the target session, the real target: pipeline.Session queues
//     statements, sends one batch while the next is built, COPY in a batch
//     as steps, the calls outside a batch; pipeline.StmtQueue, pipeline.Op
//     and pipeline.Stmt, the bookkeeping shared with the fake), sqlgen
//     (the SQL text of a change: INSERT, UPDATE, DELETE, TRUNCATE, the row
//     locator; conflict.go, the self-recording wrappers of the conflict
//     policies and the conflict record; names.go, sqlgen.Rel, the one
//     relation-name type, the quoting of name lists and literals, and the
//     log form of relations), relmap (relation mapping: relmap.Cache, relmap.Entry, the
//     target catalog lookups), compact (the net state of a group, key
//     order, multi-row row sources and chunks, the multi-row statements'
//     SQL), schema (--schema's pg_dump:
//     found, run, its script split and run; the plan of what pre-data
//     creates and its conflicts), valuecheck (whether the target refuses
//     one value, asked of the target; a value's shape, never the value),
//     registry (the applier's row in walapply.appliers: recorded, or a
//     start refused for another slot or an origin another applier owns),
//     timeline (up to where two of the source's timelines share their
//     WAL, from its timeline histories), copydata (rows encoded as COPY
//     data, text or binary, and the COPY statement that takes them),
//     initcopy (the initial copy's work: the published tables and the
//     target's check of them, what a start does about an unfinished copy,
//     the workers, whole tables and ranges, the FREEZE rule, the pipe,
//     the progress counts, the copy state per table and range, the
//     workers' origins and initcopy.WorkerOriginName, the one rule naming
//     them; initcopy.Round1, the rounding of log lines' seconds and
//     rates);
//     apply calls them by their own names (engine.Machine, sqlgen.Insert, relmap.Entry,
//     compact.Compactor, schema.Plan, valuecheck.Refuses,
//     registry.Register, timeline.SharedUntil,
//     copydata.AppendTuple, initcopy.Copier).
//   - Streamed transactions (the applying is the engine's):
//     session_stream.go (the streaming mode and the spill directory at
//     connect, the pool of --streaming parallel and its dialer, a
//     publication the source lost); package internal/parallel (the pool of
//     workers, the jobs the run loop hands them, a worker's COPY runs, the
//     lock-wait watch, the workers' origins; parallel.Pool,
//     parallel.Worker, and parallel.Applier, what a worker needs of its
//     applier); stream_parallel_origin.go (the workers' origin names, the
//     repair at connect; functions of the connection, outside the file
//     cycle).
//   - Two-phase (the applying is the engine's): session_twophase.go (the
//     checks, the slot, twophase.Leftovers, the restart recovery).
//   - Initial copy and tables published later (the work is
//     internal/initcopy's): copy.go (an attempt: the slot, the record in
//     walapply.copies, the origin; initcopy.Copier with apply's
//     connections and errors), copy_check.go (initcopy's decision and
//     checks with apply's errors; CopyCheckError), copy_progress.go
//     (CopyProgress, from initcopy's counts), copy_format.go
//     (CopyFormat*), copy_filter.go (loadCopyFilter: the copied
//     tables read for engine.CopyFilter, which skips the streamed changes
//     a copy holds), copy_sequences.go (SyncSequences), refresh.go,
//     refresh_state.go, refresh_sync.go (the session's side of tables
//     published later; the watch and the set-aside changes are the
//     engine's, engine.TableWatch); with --schema: schema.go (the
//     sections created and the phase recorded), schema_plan.go
//     (internal/schema's plan, pg_dump and errors as apply's; the
//     preflight's check).
//   - Captured DDL (--ddl): session_ddl.go (the publications read at
//     connect, the preflight's check); the applying is the engine's
//     (engine.DDLState), the capture internal/ddl's.
//   - Checks and tools: preflight.go, privileges.go, privileges_target.go,
//     identity.go (slot and origin agree), timeline.go (the
//     source's history checked, historyCheck, over what the preflight
//     hands it; outside the file cycle), failover.go,
//     compare.go, compare_catalog.go, compare_keys.go, drop.go,
//     drop_facts.go.
package apply
