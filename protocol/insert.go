package protocol

// Insert is a new row ('I').
type Insert struct {
	Streamed   bool   // set by the caller: read the xid field
	Xid        uint32 // only when Streamed: the (sub)transaction that made the change
	RelationID uint32
	New        TupleData
}

// Type implements Message.
func (*Insert) Type() MessageType { return MessageTypeInsert }
