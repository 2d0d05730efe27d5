package protocol

// LogicalMessage is the output of pg_logical_emit_message ('M').
type LogicalMessage struct {
	Streamed bool   // set by the caller: read the xid field
	Xid      uint32 // only when Streamed
	Flags    uint8  // MessageTransactional or 0
	LSN      LSN
	Prefix   string
	Content  []byte // aliases src
}

// Type implements Message.
func (*LogicalMessage) Type() MessageType { return MessageTypeMessage }

// Transactional reports whether the message was emitted transactionally.
func (m *LogicalMessage) Transactional() bool { return m.Flags&MessageTransactional != 0 }
