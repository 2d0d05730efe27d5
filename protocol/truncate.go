package protocol

// Truncate empties one or more relations ('T').
type Truncate struct {
	Streamed    bool   // set by the caller: read the xid field
	Xid         uint32 // only when Streamed
	Options     uint8  // TruncateCascade | TruncateRestartIdentity
	RelationIDs []uint32
}

// Type implements Message.
func (*Truncate) Type() MessageType { return MessageTypeTruncate }
