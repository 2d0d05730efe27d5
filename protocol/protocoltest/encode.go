// Package protocoltest builds pgoutput messages for tests: the bytes a
// PostgreSQL server would send, for transcript tests of code that consumes
// protocol.Decoder output, and a re-encoder for decoder tests.
//
// The builders write exactly what their arguments say. They do not validate,
// so a test can also build a malformed message (a zero LSN, nonzero flags)
// and check that it is rejected. An xid argument of 0 on a message that may
// be streamed means "not streamed": the message is built without the xid
// field, as pgoutput writes it outside a stream block.
package protocoltest

import (
	"encoding/binary"
	"fmt"

	"github.com/walapply/walapply/protocol"
)

// Encode returns the wire form of a message, the inverse of its Decode: for
// every message m that decodes from b, Encode(m) equals b. Streamed (on
// Relation, Type, Insert, Update, Delete, Truncate and Message) and
// WithAbortInfo (on Stream Abort) decide whether the optional fields are
// written, just as they decide whether Decode reads them.
//
// Encode panics on a Message type this package does not know, which can
// only be a programming error in a test.
func Encode(m protocol.Message) []byte {
	var w writer
	w.byte(byte(m.Type()))
	switch m := m.(type) {
	case *protocol.Begin:
		w.u64(uint64(m.FinalLSN))
		w.u64(uint64(m.CommitTime))
		w.u32(m.Xid)
	case *protocol.Commit:
		w.byte(m.Flags)
		w.u64(uint64(m.CommitLSN))
		w.u64(uint64(m.EndLSN))
		w.u64(uint64(m.CommitTime))
	case *protocol.Origin:
		w.u64(uint64(m.CommitLSN))
		w.cstring(m.Name)
	case *protocol.Relation:
		w.streamXid(m.Streamed, m.Xid)
		w.u32(m.RelationID)
		w.cstring(m.Namespace)
		w.cstring(m.Name)
		w.byte(m.ReplicaIdentity)
		w.u16(uint16(len(m.Columns)))
		for _, c := range m.Columns {
			w.byte(c.Flags)
			w.cstring(c.Name)
			w.u32(c.TypeOID)
			w.u32(uint32(c.TypeMod))
		}
	case *protocol.TypeMessage:
		w.streamXid(m.Streamed, m.Xid)
		w.u32(m.TypeOID)
		w.cstring(m.Namespace)
		w.cstring(m.Name)
	case *protocol.Insert:
		w.streamXid(m.Streamed, m.Xid)
		w.u32(m.RelationID)
		w.byte(protocol.TupleNew)
		w.tuple(m.New)
	case *protocol.Update:
		w.streamXid(m.Streamed, m.Xid)
		w.u32(m.RelationID)
		if m.OldKind != 0 {
			w.byte(m.OldKind)
			w.tuple(m.Old)
		}
		w.byte(protocol.TupleNew)
		w.tuple(m.New)
	case *protocol.Delete:
		w.streamXid(m.Streamed, m.Xid)
		w.u32(m.RelationID)
		w.byte(m.OldKind)
		w.tuple(m.Old)
	case *protocol.Truncate:
		w.streamXid(m.Streamed, m.Xid)
		w.u32(uint32(len(m.RelationIDs)))
		w.byte(m.Options)
		for _, id := range m.RelationIDs {
			w.u32(id)
		}
	case *protocol.LogicalMessage:
		w.streamXid(m.Streamed, m.Xid)
		w.byte(m.Flags)
		w.u64(uint64(m.LSN))
		w.cstring(m.Prefix)
		w.u32(uint32(len(m.Content)))
		w.b = append(w.b, m.Content...)
	case *protocol.StreamStart:
		w.u32(m.Xid)
		if m.FirstSegment {
			w.byte(1)
		} else {
			w.byte(0)
		}
	case *protocol.StreamStop:
	case *protocol.StreamCommit:
		w.u32(m.Xid)
		w.byte(m.Flags)
		w.u64(uint64(m.CommitLSN))
		w.u64(uint64(m.EndLSN))
		w.u64(uint64(m.CommitTime))
	case *protocol.StreamAbort:
		w.u32(m.Xid)
		w.u32(m.SubXid)
		if m.WithAbortInfo {
			w.u64(uint64(m.AbortLSN))
			w.u64(uint64(m.AbortTime))
		}
	case *protocol.BeginPrepare:
		w.u64(uint64(m.PrepareLSN))
		w.u64(uint64(m.EndLSN))
		w.u64(uint64(m.PrepareTime))
		w.u32(m.Xid)
		w.cstring(m.GID)
	case *protocol.Prepare:
		w.prepare(m.Flags, m.PrepareLSN, m.EndLSN, m.PrepareTime, m.Xid, m.GID)
	case *protocol.StreamPrepare:
		w.prepare(m.Flags, m.PrepareLSN, m.EndLSN, m.PrepareTime, m.Xid, m.GID)
	case *protocol.CommitPrepared:
		w.byte(m.Flags)
		w.u64(uint64(m.CommitLSN))
		w.u64(uint64(m.EndLSN))
		w.u64(uint64(m.CommitTime))
		w.u32(m.Xid)
		w.cstring(m.GID)
	case *protocol.RollbackPrepared:
		w.byte(m.Flags)
		w.u64(uint64(m.PrepareEndLSN))
		w.u64(uint64(m.RollbackEndLSN))
		w.u64(uint64(m.PrepareTime))
		w.u64(uint64(m.RollbackTime))
		w.u32(m.Xid)
		w.cstring(m.GID)
	default:
		panic(fmt.Sprintf("protocoltest: Encode: unknown message type %T", m))
	}
	return w.b
}

// writer appends big-endian fields.
type writer struct{ b []byte }

func (w *writer) byte(v byte)  { w.b = append(w.b, v) }
func (w *writer) u16(v uint16) { w.b = binary.BigEndian.AppendUint16(w.b, v) }
func (w *writer) u32(v uint32) { w.b = binary.BigEndian.AppendUint32(w.b, v) }
func (w *writer) u64(v uint64) { w.b = binary.BigEndian.AppendUint64(w.b, v) }

func (w *writer) cstring(s string) {
	w.b = append(w.b, s...)
	w.b = append(w.b, 0)
}

func (w *writer) streamXid(streamed bool, xid uint32) {
	if streamed {
		w.u32(xid)
	}
}

// tuple writes a TupleData. A column of kind 't' or 'b' gets its Int32
// length and value; any other kind is written as the bare kind byte.
func (w *writer) tuple(t protocol.TupleData) {
	w.u16(uint16(len(t.Columns)))
	for _, c := range t.Columns {
		w.byte(c.Kind)
		if c.Kind == protocol.ColumnText || c.Kind == protocol.ColumnBinary {
			w.u32(uint32(len(c.Data)))
			w.b = append(w.b, c.Data...)
		}
	}
}

func (w *writer) prepare(flags uint8, prepareLSN, endLSN protocol.LSN, prepareTime protocol.Timestamp, xid uint32, gid string) {
	w.byte(flags)
	w.u64(uint64(prepareLSN))
	w.u64(uint64(endLSN))
	w.u64(uint64(prepareTime))
	w.u32(xid)
	w.cstring(gid)
}
