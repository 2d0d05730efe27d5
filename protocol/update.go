package protocol

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
