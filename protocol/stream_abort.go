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

// Decode parses a complete Stream Abort message: 9 bytes, or 25 when
// WithAbortInfo is set. Without abort info, AbortLSN and AbortTime are set
// to 0 as proto.c does. The abort LSN is not checked: it is informational.
func (dst *StreamAbort) Decode(src []byte) error {
	var r reader
	r.start(src, MessageTypeStreamAbort)
	dst.Xid = r.xid("xid")
	dst.SubXid = r.xid("subtransaction xid")
	if dst.WithAbortInfo {
		dst.AbortLSN = r.lsn("abort LSN")
		dst.AbortTime = r.timestamp("abort time")
	} else {
		dst.AbortLSN, dst.AbortTime = 0, 0
	}
	return r.finish()
}
