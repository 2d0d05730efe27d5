package protocol

// StreamAbort aborts a streamed transaction or one of its subtransactions
// ('A'). AbortLSN and AbortTime are on the wire only when the client asked for
// streaming = parallel (protocol 4); the caller says so with WithAbortInfo.
type StreamAbort struct {
	WithAbortInfo bool // set by the caller: read AbortLSN and AbortTime
	Xid           uint32
	SubXid        uint32 // == Xid when the whole transaction aborts
	AbortLSN      LSN
	AbortTime     Timestamp
}

// Type implements Message.
func (*StreamAbort) Type() MessageType { return MessageTypeStreamAbort }

// Toplevel reports whether the whole transaction is aborted.
func (m *StreamAbort) Toplevel() bool { return m.Xid == m.SubXid }
