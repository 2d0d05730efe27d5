package engine

import (
	"github.com/walapply/walapply/apply/internal/pipeline"
	"github.com/walapply/walapply/protocol"
)

// Operation names: how TxnError.Op, the errors and the log spell what was
// being applied. They are SQL's words, in capitals, whichever path (row
// by row, compacted, COPY, two-phase) failed; pipeline's opNames (internal/pipeline) and
// every TxnError take them from here.
const (
	OpBegin    = "BEGIN"
	OpInsert   = "INSERT"
	OpUpdate   = "UPDATE"
	OpDelete   = "DELETE"
	OpTruncate = "TRUNCATE"
	OpCommit   = "COMMIT"
	// OpOriginProgress is the statement that records the source position
	// in the target transaction (the replication origin's progress).
	OpOriginProgress = "origin progress"
	// OpCopy is a run of streamed INSERTs sent with COPY; OpInitialCopy is
	// a table's initial copy (--copy).
	OpCopy        = "INSERT (COPY)"
	OpInitialCopy = "initial copy (COPY)"
	// OpPrepare, OpCommitPrepared and OpRollbackPrepared are two-phase
	// transactions' statements (followed by the GID in TxnError.Op when it
	// is known).
	OpPrepare          = "PREPARE TRANSACTION"
	OpCommitPrepared   = "COMMIT PREPARED"
	OpRollbackPrepared = "ROLLBACK PREPARED"
)

// opOf names the operation of a change message: OpInsert for an Insert,
// and so on; "" for a message that is no change.
func opOf(t protocol.MessageType) pipeline.Op {
	switch t {
	case protocol.MessageTypeInsert:
		return pipeline.OpInsert
	case protocol.MessageTypeUpdate:
		return pipeline.OpUpdate
	case protocol.MessageTypeDelete:
		return pipeline.OpDelete
	case protocol.MessageTypeTruncate:
		return pipeline.OpTruncate
	}
	return pipeline.OpBegin
}

// opOfKind names the operation of a per-row statement kind ('I', 'U',
// 'G' for an UPDATE guarded against a taken key, 'D').
func opOfKind(kind byte) pipeline.Op {
	switch kind {
	case 'I':
		return pipeline.OpInsert
	case 'D':
		return pipeline.OpDelete
	}
	return pipeline.OpUpdate
}
