package protocol

import "fmt"

// Update is a changed row ('U').
type Update struct {
	Streamed   bool   // set by the caller: read the xid field
	Xid        uint32 // only when Streamed
	RelationID uint32
	OldKind    byte      // 0 (no old tuple), TupleOldKey or TupleOld
	Old        TupleData // meaningful only when OldKind != 0
	New        TupleData
}

// Type implements Message.
func (*Update) Type() MessageType { return MessageTypeUpdate }

// Decode parses a complete Update message: an optional 'K' or 'O' old tuple,
// then 'N' and the new tuple. Without an old tuple, OldKind is 0 and
// Old.Columns is emptied. Like Insert, a warm Update decodes without
// allocating.
func (dst *Update) Decode(src []byte) error {
	var r reader
	r.start(src, MessageTypeUpdate)
	dst.Xid = r.streamXid(dst.Streamed)
	dst.RelationID = r.oid("relation OID")
	dst.OldKind = 0
	dst.Old.Columns = dst.Old.Columns[:0]
	off := r.off
	m := r.uint8("tuple marker")
	if r.ok() && (m == TupleOldKey || m == TupleOld) {
		dst.OldKind = m
		dst.Old.decode(&r, "old tuple")
		off = r.off
		m = r.uint8("new tuple marker")
	}
	if r.ok() && m != TupleNew {
		field, want := "tuple marker", "'K', 'O' or 'N'"
		if dst.OldKind != 0 {
			field, want = "new tuple marker", "'N'"
		}
		r.failAt(field, off, fmt.Errorf("%w: %s, want %s", ErrBadMarker, describeByte(m), want))
	}
	dst.New.decode(&r, "new tuple")
	return r.finish()
}
