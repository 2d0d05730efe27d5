// Package parallel applies streamed transactions as they stream, with
// --streaming parallel (pgoutput protocol 4, PostgreSQL 16+), each on a
// target connection of its own (Worker), as PostgreSQL's parallel apply
// workers do (applyparallelworker.c). It holds the pool of workers, the
// jobs the run loop hands them, a worker's COPY runs, the lock-wait watch
// and the workers' origins; package apply decides which transactions come
// here and runs the loop around it (apply/internal/engine/stream_parallel.go), and gives
// each worker an applier of its own through Applier.
//
// Applying as they stream. The first Stream Start of a transaction takes
// an idle worker (at most Options.Size, like
// max_parallel_apply_workers_per_subscription); when none is idle, the
// transaction takes the spill path (apply/internal/engine/stream.go), as PostgreSQL's
// leader serialises to a file. The worker opens a target transaction and
// applies the block's changes as the run loop hands them over, through a
// bounded queue: nothing of the transaction is held in memory beyond that
// queue and the worker's batch, and nothing is spilled (DESIGN.md
// invariant 3). A change of a subtransaction not seen before first defines
// a savepoint named after it; the Stream Abort of a subtransaction rolls
// back to its savepoint, which also discards the subtransactions nested in
// it, because every change after a subtransaction's first one belongs to
// it or to them until it ends (invariant 4, as for spill files); the
// Stream Abort of the transaction rolls it back.
//
// Commit order. A worker's transaction commits only at its Stream Commit,
// and the run loop hands that over only after everything before it is
// committed on the target (Stream Commit needs its own transaction: the
// main connection's group is committed and settled first), then waits for
// the worker's COMMIT before it reads the next message. So target commits,
// on whichever connection, happen one at a time in the source's commit
// order, and their records lie in the target's WAL in that order.
//
// Progress (invariant 1) with one origin per session (PostgreSQL 15–18).
// Each worker has an origin of its own (OriginPrefix), set up on its
// connection for the session, so its changes carry an origin (invariant
// 8), and its COMMIT or PREPARE TRANSACTION advances that origin to the
// source transaction's end LSN inside the same transaction. Right after
// it, the main connection commits a transaction of its own that advances
// the applier's origin to the same LSN (commit, with nothing else in it).
// So the applier's origin names the last applied transaction again, and
// every reader of it (feedback, status, the preflight, --until) is
// unchanged: feedback flushes the target's WAL up to that small commit,
// which lies after the worker's, so nothing is confirmed before it is
// durable (invariant 2). The one gap is a crash between the two commits:
// the worker's origin is then ahead of the applier's. At every connect,
// before the start position is read, apply moves the applier's origin up
// to the furthest worker origin (Furthest). That is exact: commits are in
// source order in the target's WAL, so if a worker's commit survived a
// crash, every earlier source transaction's did; and no later transaction
// can be on the target, since its commit would have advanced an origin
// further. Stale worker origins (a worker's last transaction long ago)
// are behind the applier's origin and change nothing.
//
// Two-phase. Stream Prepare prepares the worker's transaction under its
// GID, advancing the worker's origin to the prepare's end; the main
// connection's origin follows as after a commit; COMMIT PREPARED and
// ROLLBACK PREPARED run on the main connection as always
// (apply/internal/engine/prepare.go).
//
// Fallback. A worker that fails for any reason (a conflict, a lost
// connection, a lock wait that cannot end, see Watch) rolls back, and the
// session ends with a FallbackError: apply's Run starts the next session
// at once with the transaction's xid marked for the spill path, so the
// source sends it again from its first change and it is applied as with
// --streaming on, with that path's error handling. Nothing was committed
// or confirmed of it, so nothing is lost or doubled. The fallback is
// logged and counted (Stats.ParallelFallbacks).
//
// A transaction also takes the spill path when --skip-lsn is armed, or a
// table's initial copy still filters changes (apply/copy_filter.go), or a
// table is being copied (apply/refresh_sync.go): those decisions need the
// commit LSN, which only Stream Commit brings; and with --ddl, whose
// messages inside a transaction the worker does not apply
// (apply/internal/engine/ddl_apply.go). The engine makes that choice (parallelUsable).
package parallel
