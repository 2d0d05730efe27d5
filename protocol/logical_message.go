package protocol

import "fmt"

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

// Decode parses a complete Message message. Flags may be 0 or
// MessageTransactional; the content length must not be negative. Content
// aliases src.
func (dst *LogicalMessage) Decode(src []byte) error {
	var r reader
	r.start(src, MessageTypeMessage)
	dst.Xid = r.streamXid(dst.Streamed)
	dst.Flags = r.flags("flags", MessageTransactional)
	dst.LSN = r.lsn("LSN")
	dst.Prefix = r.cstring("prefix")
	off := r.off
	n := r.int32("content length")
	dst.Content = nil
	if r.ok() && n < 0 {
		r.failAt("content length", off, fmt.Errorf("%w: %d", ErrBadLength, n))
	}
	if r.ok() && int64(n) > int64(r.remaining()) {
		r.failAt("content", r.off, fmt.Errorf("%w: %d bytes wanted, %d left", ErrShortMessage, n, r.remaining()))
	}
	dst.Content = r.bytesN(int(n), "content")
	return r.finish()
}
