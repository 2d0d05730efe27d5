package protocol

// StreamPrepare prepares a streamed transaction ('p'); same layout as Prepare.
type StreamPrepare struct {
	Flags       uint8 // must be 0
	PrepareLSN  LSN
	EndLSN      LSN
	PrepareTime Timestamp
	Xid         uint32
	GID         string
}

// Type implements Message.
func (*StreamPrepare) Type() MessageType { return MessageTypeStreamPrepare }

// Decode parses a complete Stream Prepare message; the checks are those of
// Prepare.
func (dst *StreamPrepare) Decode(src []byte) error {
	var r reader
	r.start(src, MessageTypeStreamPrepare)
	dst.Flags, dst.PrepareLSN, dst.EndLSN, dst.PrepareTime, dst.Xid, dst.GID = decodePrepareBody(&r)
	return r.finish()
}
