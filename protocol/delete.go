package protocol

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
