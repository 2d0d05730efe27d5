// Package pipeline is apply's target session: the connection that applies
// changes on the target, a pipelined pgx session.
//
// Statements are queued into a batch (StmtQueue keeps what each one is
// for), sent without waiting (SendAsync) and their results drained before
// the next batch goes out: one batch is in flight while the applier builds
// the next (one-deep pipelining). A queue that holds a COPY is sent as
// steps on a goroutine of its own (copy.go). The calls outside a batch
// (calls.go) serve two-phase outcomes, the origin's repair and a streamed
// COPY.
//
// apply declares what it needs of the session where it uses it (its target
// interface, apply/internal/engine/applier_target.go); *Session is the real one, and the
// engine's transcript tests use a recording fake that shares StmtQueue and
// its result checks (NoteResult). Per change, QueueStmt and Full allocate
// nothing once warm (apply's TestAllocs).
package pipeline
