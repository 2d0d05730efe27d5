// Package twophase replays prepared transactions on the target: the mapping
// from a source transaction to the GID it is prepared under on the target
// (gid.go), the SQL of PREPARE TRANSACTION, COMMIT PREPARED and ROLLBACK
// PREPARED, and what restart recovery needs to read back from the target's
// pg_prepared_xacts (target.go), and restart recovery itself: reporting the
// prepared transactions nothing will finish (recover.go, Leftovers).
//
// # Two phases on the wire and on the target
//
// With two-phase decoding (pgoutput protocol 3, PostgreSQL 15+) the source
// sends a prepared transaction when it is prepared, as Begin Prepare,
// changes, Prepare, and its outcome later, as Commit Prepared or Rollback
// Prepared, in WAL order among other transactions. The applier reproduces
// both steps: the changes go into a target transaction that ends with
// PREPARE TRANSACTION, and the outcome becomes COMMIT PREPARED or ROLLBACK
// PREPARED of the same GID. Between the two, the target holds the prepared
// transaction (its locks included) exactly as the source does, and a crash
// of either side keeps it, since prepared transactions survive restarts.
//
// # GIDs
//
// A source GID is chosen by the source's clients, so two sources replicated
// into one target can use the same one. By default the target GID is
// derived from the applier's name and the source xid instead
// (GIDModeApplier, "walapply_<applier>_<xid>", like PostgreSQL's
// subscriber's pg_gid_<subid>_<xid>), which no other applier can produce;
// GIDModeSource keeps the source's GID. PREPARE TRANSACTION and its
// outcomes take the GID only as a literal, never as a parameter, so it is
// always quoted with QuoteGID (DESIGN.md invariant 7).
//
// # Progress
//
// The origin advances with each step (DESIGN.md invariant 1): the target
// transaction calls pg_replication_origin_xact_setup with the Prepare's end
// LSN as its last statement before PREPARE TRANSACTION; COMMIT PREPARED and
// ROLLBACK PREPARED cannot run in a transaction block, so the setup runs
// alone on the same session just before them, and their commit or abort
// record carries the outcome's end LSN (checked on PostgreSQL 15 and 18).
// Both setups are written so that they only happen when the step can
// succeed (state.XactSetupUnlessPreparedSQL, state.XactSetupIfPreparedSQL): from
// PostgreSQL 16 on an aborted transaction advances the origin as well (see
// package state), and a PREPARE TRANSACTION that fails on a GID in use
// would otherwise mark a transaction as applied that is not.
//
// # Recovery
//
// Nothing is kept outside the target. After a restart, streaming resumes at
// the origin's progress: a transaction prepared before it is on the target
// already, and the source sends only its outcome. An outcome whose GID is
// not prepared on the target was either finished before the crash (the
// origin is past it) or never reached the target because it had nothing to
// send at PREPARE; neither is an error. Prepared transactions of the applier
// that the source no longer has prepared are reported, never finished on
// the applier's own initiative: only an operator can tell what they should
// become.
package twophase
