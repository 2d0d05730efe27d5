package protocol

import "fmt"

// Delete is a removed row ('D').
type Delete struct {
	Streamed   bool   // set by the caller: read the xid field
	Xid        uint32 // only when Streamed
	RelationID uint32
	OldKind    byte // TupleOldKey or TupleOld
	Old        TupleData
}

// Type implements Message.
func (*Delete) Type() MessageType { return MessageTypeDelete }

// Decode parses a complete Delete message: 'K' or 'O' and the old tuple.
// Like Insert, a warm Delete decodes without allocating.
func (dst *Delete) Decode(src []byte) error {
	var r reader
	r.start(src, MessageTypeDelete)
	dst.Xid = r.streamXid(dst.Streamed)
	dst.RelationID = r.oid("relation OID")
	off := r.off
	dst.OldKind = r.uint8("old tuple marker")
	if r.ok() && dst.OldKind != TupleOldKey && dst.OldKind != TupleOld {
		r.failAt("old tuple marker", off, fmt.Errorf("%w: %s, want 'K' or 'O'", ErrBadMarker, describeByte(dst.OldKind)))
	}
	dst.Old.decode(&r, "old tuple")
	return r.finish()
}
