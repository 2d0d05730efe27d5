package protocoltest

import "github.com/walapply/walapply/protocol"

// Col is one column of a row image; build it with Text, Binary, Null or
// Unchanged.
type Col = protocol.TupleColumn

// Text is a column in text format ('t').
func Text(s string) Col { return Col{Kind: protocol.ColumnText, Data: []byte(s)} }

// Binary is a column in binary format ('b'), the type's send form.
func Binary(b []byte) Col { return Col{Kind: protocol.ColumnBinary, Data: b} }

// Null is a NULL column ('n').
func Null() Col { return Col{Kind: protocol.ColumnNull} }

// Unchanged is an unchanged TOASTed column ('u').
func Unchanged() Col { return Col{Kind: protocol.ColumnUnchanged} }

// Column describes a Relation column with type modifier -1 (none). key marks
// it as part of the replica identity.
func Column(name string, typeOID uint32, key bool) protocol.RelationColumn {
	c := protocol.RelationColumn{Name: name, TypeOID: typeOID, TypeMod: -1}
	if key {
		c.Flags = protocol.ColumnFlagKey
	}
	return c
}

// Begin builds 'B'.
func Begin(finalLSN protocol.LSN, commitTime protocol.Timestamp, xid uint32) []byte {
	return Encode(&protocol.Begin{FinalLSN: finalLSN, CommitTime: commitTime, Xid: xid})
}

// Commit builds 'C' with flags 0.
func Commit(commitLSN, endLSN protocol.LSN, commitTime protocol.Timestamp) []byte {
	return Encode(&protocol.Commit{CommitLSN: commitLSN, EndLSN: endLSN, CommitTime: commitTime})
}

// Origin builds 'O'. Inside a stream the commit LSN is 0.
func Origin(commitLSN protocol.LSN, name string) []byte {
	return Encode(&protocol.Origin{CommitLSN: commitLSN, Name: name})
}

// Relation builds 'R'; xid 0 means not streamed. replicaIdentity is one of
// protocol.ReplicaIdentityDefault, Nothing, Full, Index.
func Relation(rel, xid uint32, namespace, name string, replicaIdentity byte, cols ...protocol.RelationColumn) []byte {
	return Encode(&protocol.Relation{
		Streamed: xid != 0, Xid: xid, RelationID: rel,
		Namespace: namespace, Name: name, ReplicaIdentity: replicaIdentity, Columns: cols,
	})
}

// Type builds 'Y'; xid 0 means not streamed.
func Type(typeOID, xid uint32, namespace, name string) []byte {
	return Encode(&protocol.TypeMessage{Streamed: xid != 0, Xid: xid, TypeOID: typeOID, Namespace: namespace, Name: name})
}

// Insert builds 'I' with the new row cols; xid 0 means not streamed.
func Insert(rel, xid uint32, cols ...Col) []byte {
	return Encode(&protocol.Insert{Streamed: xid != 0, Xid: xid, RelationID: rel, New: tuple(cols)})
}

// Update builds 'U' without an old tuple (the key did not change); xid 0
// means not streamed.
func Update(rel, xid uint32, newCols ...Col) []byte {
	return Encode(&protocol.Update{Streamed: xid != 0, Xid: xid, RelationID: rel, New: tuple(newCols)})
}

// UpdateOld builds 'U' with an old tuple: oldKind is protocol.TupleOldKey
// ('K', the old key; non-key columns Null) or protocol.TupleOld ('O', the
// whole old row, for REPLICA IDENTITY FULL).
func UpdateOld(rel, xid uint32, oldKind byte, oldCols, newCols []Col) []byte {
	return Encode(&protocol.Update{
		Streamed: xid != 0, Xid: xid, RelationID: rel,
		OldKind: oldKind, Old: tuple(oldCols), New: tuple(newCols),
	})
}

// Delete builds 'D'; oldKind is protocol.TupleOldKey or protocol.TupleOld.
func Delete(rel, xid uint32, oldKind byte, oldCols ...Col) []byte {
	return Encode(&protocol.Delete{Streamed: xid != 0, Xid: xid, RelationID: rel, OldKind: oldKind, Old: tuple(oldCols)})
}

// Truncate builds 'T'; options is a mask of protocol.TruncateCascade and
// protocol.TruncateRestartIdentity; xid 0 means not streamed.
func Truncate(xid uint32, options uint8, rels ...uint32) []byte {
	return Encode(&protocol.Truncate{Streamed: xid != 0, Xid: xid, Options: options, RelationIDs: rels})
}

// Message builds 'M' (pg_logical_emit_message); xid 0 means not streamed.
func Message(xid uint32, transactional bool, lsn protocol.LSN, prefix string, content []byte) []byte {
	m := &protocol.LogicalMessage{Streamed: xid != 0, Xid: xid, LSN: lsn, Prefix: prefix, Content: content}
	if transactional {
		m.Flags = protocol.MessageTransactional
	}
	return Encode(m)
}

// StreamStart builds 'S'.
func StreamStart(xid uint32, firstSegment bool) []byte {
	return Encode(&protocol.StreamStart{Xid: xid, FirstSegment: firstSegment})
}

// StreamStop builds 'E'.
func StreamStop() []byte { return Encode(&protocol.StreamStop{}) }

// StreamCommit builds 'c' with flags 0.
func StreamCommit(xid uint32, commitLSN, endLSN protocol.LSN, commitTime protocol.Timestamp) []byte {
	return Encode(&protocol.StreamCommit{Xid: xid, CommitLSN: commitLSN, EndLSN: endLSN, CommitTime: commitTime})
}

// StreamAbort builds the 9-byte 'A' (streaming = on). subXid == xid aborts
// the whole transaction.
func StreamAbort(xid, subXid uint32) []byte {
	return Encode(&protocol.StreamAbort{Xid: xid, SubXid: subXid})
}

// StreamAbortParallel builds the 25-byte 'A' sent with streaming = parallel.
func StreamAbortParallel(xid, subXid uint32, abortLSN protocol.LSN, abortTime protocol.Timestamp) []byte {
	return Encode(&protocol.StreamAbort{WithAbortInfo: true, Xid: xid, SubXid: subXid, AbortLSN: abortLSN, AbortTime: abortTime})
}

// BeginPrepare builds 'b'.
func BeginPrepare(prepareLSN, endLSN protocol.LSN, prepareTime protocol.Timestamp, xid uint32, gid string) []byte {
	return Encode(&protocol.BeginPrepare{PrepareLSN: prepareLSN, EndLSN: endLSN, PrepareTime: prepareTime, Xid: xid, GID: gid})
}

// Prepare builds 'P' with flags 0.
func Prepare(prepareLSN, endLSN protocol.LSN, prepareTime protocol.Timestamp, xid uint32, gid string) []byte {
	return Encode(&protocol.Prepare{PrepareLSN: prepareLSN, EndLSN: endLSN, PrepareTime: prepareTime, Xid: xid, GID: gid})
}

// StreamPrepare builds 'p' with flags 0.
func StreamPrepare(prepareLSN, endLSN protocol.LSN, prepareTime protocol.Timestamp, xid uint32, gid string) []byte {
	return Encode(&protocol.StreamPrepare{PrepareLSN: prepareLSN, EndLSN: endLSN, PrepareTime: prepareTime, Xid: xid, GID: gid})
}

// CommitPrepared builds 'K' with flags 0.
func CommitPrepared(commitLSN, endLSN protocol.LSN, commitTime protocol.Timestamp, xid uint32, gid string) []byte {
	return Encode(&protocol.CommitPrepared{CommitLSN: commitLSN, EndLSN: endLSN, CommitTime: commitTime, Xid: xid, GID: gid})
}

// RollbackPrepared builds 'r' with flags 0.
func RollbackPrepared(prepareEndLSN, rollbackEndLSN protocol.LSN, prepareTime, rollbackTime protocol.Timestamp, xid uint32, gid string) []byte {
	return Encode(&protocol.RollbackPrepared{
		PrepareEndLSN: prepareEndLSN, RollbackEndLSN: rollbackEndLSN,
		PrepareTime: prepareTime, RollbackTime: rollbackTime, Xid: xid, GID: gid,
	})
}

func tuple(cols []Col) protocol.TupleData { return protocol.TupleData{Columns: cols} }
