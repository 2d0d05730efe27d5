package protocol

import "fmt"

// Truncate empties one or more relations ('T').
type Truncate struct {
	Streamed    bool   // set by the caller: read the xid field
	Xid         uint32 // only when Streamed
	Options     uint8  // TruncateCascade | TruncateRestartIdentity
	RelationIDs []uint32
}

// Type implements Message.
func (*Truncate) Type() MessageType { return MessageTypeTruncate }

// Decode parses a complete Truncate message. Unlike proto.c, which ignores
// them, it rejects option bits other than TruncateCascade and
// TruncateRestartIdentity (a future option could change what the TRUNCATE
// means, so applying it without would be wrong), and it rejects a relation
// count of 0, which pgoutput never sends. RelationIDs' backing array is
// reused.
func (dst *Truncate) Decode(src []byte) error {
	var r reader
	r.start(src, MessageTypeTruncate)
	dst.Xid = r.streamXid(dst.Streamed)
	off := r.off
	n := r.int32("relation count")
	dst.Options = r.flags("options", TruncateCascade|TruncateRestartIdentity)
	dst.RelationIDs = dst.RelationIDs[:0]
	if !r.ok() {
		return r.finish()
	}
	if n <= 0 {
		r.failAt("relation count", off, fmt.Errorf("%w: %d relations", ErrBadLength, n))
		return r.finish()
	}
	if int64(n)*4 > int64(r.remaining()) {
		r.failAt("relation count", off, fmt.Errorf("%w: %d relations in %d bytes", ErrShortMessage, n, r.remaining()))
		return r.finish()
	}
	for i := 0; i < int(n); i++ {
		dst.RelationIDs = append(dst.RelationIDs, r.oid("relation OID"))
	}
	return r.finish()
}
