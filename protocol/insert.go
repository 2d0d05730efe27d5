package protocol

import "fmt"

// Insert is a new row ('I').
type Insert struct {
	Streamed   bool   // set by the caller: read the xid field
	Xid        uint32 // only when Streamed: the (sub)transaction that made the change
	RelationID uint32
	New        TupleData
}

// Type implements Message.
func (*Insert) Type() MessageType { return MessageTypeInsert }

// Decode parses a complete Insert message: the relation OID, the 'N' marker
// and the new tuple. New.Columns' backing array is reused and the column
// values alias src, so decoding a warm Insert does not allocate.
func (dst *Insert) Decode(src []byte) error {
	var r reader
	r.start(src, MessageTypeInsert)
	dst.Xid = r.streamXid(dst.Streamed)
	dst.RelationID = r.oid("relation OID")
	off := r.off
	if m := r.uint8("new tuple marker"); r.ok() && m != TupleNew {
		r.failAt("new tuple marker", off, fmt.Errorf("%w: %s, want 'N'", ErrBadMarker, describeByte(m)))
	}
	dst.New.decode(&r, "new tuple")
	return r.finish()
}
