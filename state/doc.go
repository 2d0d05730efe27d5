// Package state keeps walapply's durable progress: the replication origin on
// the target (origin.go; the per-transaction advance, its two-phase
// variants and the rewind in origin_xact.go), the FlushTracker that decides which source position
// may be confirmed (flush.go), and the spill files that hold streamed
// in-progress transactions until their Stream Commit or Stream Prepare
// (spill*.go).
//
// # Progress lives in the target
//
// The only durable record of how far the applier got is the target's
// replication origin, advanced inside every target transaction that applies
// a source transaction (DESIGN.md invariant 1). Nothing else on disk is
// needed to restart: spill files are scratch space and are deleted at start.
//
// # Aborts advance the origin
//
// XactSetupSQL sets session variables (the origin LSN and timestamp) that
// stay set after the transaction ends, until the next XactSetupSQL or
// xactResetSQL. From PostgreSQL 16 on, the abort of any transaction that has
// an xid records them as well and advances the origin, as a commit does
// (checked on 15 to 18 by TestOriginAbortAdvances; 15 advances only on
// commit and prepare). So on 16 and later:
//
//   - an explicit ROLLBACK after XactSetupSQL, an error after it followed by
//     ROLLBACK, a COMMIT that fails (a deferred constraint), and even a
//     session that disconnects inside such a transaction, mark the source
//     transaction as applied although nothing of it was: the source would
//     never send it again. PostgreSQL's own apply worker clears the
//     variables in its error handler (replorigin_reset in worker.c), which a
//     client cannot do inside an aborted transaction.
//   - a later transaction on the same session that aborts without calling
//     XactSetupSQL advances the origin to the stale position too.
//
// On every version, a later transaction on the session that commits
// without calling XactSetupSQL advances the origin to the stale position,
// which is wrong if the transaction that set it failed.
//
// An applier therefore runs XactSetupSQL as the last statement before COMMIT
// or PREPARE TRANSACTION, after SET CONSTRAINTS ALL IMMEDIATE, so that no
// statement of its own can fail after it; runs xactResetSQL before a
// deliberate ROLLBACK; and after any failure once XactSetupSQL has run (a
// failed COMMIT, PREPARE TRANSACTION or COMMIT PREPARED, a lost connection),
// treats the origin's progress as unreliable: it resets the session
// (SessionReset, on a new connection if need be), moves the progress back to
// the last position it knows committed (AdvanceOrigin, which may go
// backwards) and only then sets the session up again: RewindOrigin, once
// per failed transaction. A crash of the applier
// between such a failure and that repair still leaves the origin ahead of
// the data; no client-side order closes that window on 16 and later.
//
// # Spill files
//
// A source transaction streamed while still in progress (pgoutput protocol 2
// and later) arrives in chunks between Stream Start and Stream Stop, possibly
// interleaved with other transactions, and may still abort. Its messages are
// appended to one file per top-level xid and replayed in one target
// transaction at Stream Commit or Stream Prepare, so memory does not grow
// with transaction size (invariant 3).
//
// A spill file is a header followed by records. All integers are
// little-endian. CRC32C is the Castagnoli polynomial.
//
//	file   := header record*
//
//	header := magic      [8]byte  "WALSPILL"
//	          version    uint16   format version, 1
//	          reserved   uint16   0
//	          xid        uint32   top-level xid of the streamed transaction
//	          nameLen    uint16   length of the applier name
//	          name       [nameLen]byte  applier name (UTF-8)
//	          crc        uint32   CRC32C of every header byte before it
//
//	record := crc        uint32   CRC32C of length, kind, subxid and payload
//	          length     uint32   payload length in bytes
//	          kind       uint8    1 = a pgoutput message
//	          subxid     uint32   xid that made the change (the top-level xid
//	                              itself, or a subtransaction's)
//	          payload    [length]byte
//
// The payload of a message record is the raw pgoutput message exactly as it
// arrived in the XLogData (type byte included), so replay decodes it with the
// same decoders as the live stream and no second encoding can drift from it.
//
// Each record carries its own checksum, so a torn or flipped byte anywhere is
// found at the record it hits, and the reader names the file and the offset
// (ErrSpillCorrupt). A file that ends inside a record is corrupt too: a
// writer never leaves a partial record behind (a failed write truncates the
// file back to its last complete record), so a truncated tail means lost data.
//
// # Subtransaction aborts
//
// A Stream Abort for a subtransaction discards exactly the changes from that
// subtransaction's first change onward (invariant 4). As PostgreSQL's
// worker.c does, the writer remembers, in memory, the offset of the first
// record of every subxid in the order they first appear, and an abort
// truncates the file at that offset and forgets that subxid and every one
// that first appeared after it. Changes made after the aborted
// subtransaction started belong to it or to its own subtransactions, whose
// aborts the source also sends, children first. The offsets are not
// persisted: after a restart nothing streamed has been confirmed to the
// source, which sends the transaction again from its start, so the files of
// an earlier run are only removed (OpenSpillDir), and only from a directory
// whose owner file names this applier and target (spill_owner.go).
//
// # Filesystem
//
// Files are reached through the small FS interface; OSFS is the real one and
// internal/spillfs.FaultFS wraps any FS to inject ENOSPC, short writes and
// failed syncs in tests, in the style of pebble's vfs.
package state
