package protocol

// StreamStart opens a block of a streamed in-progress transaction ('S').
type StreamStart struct {
	Xid          uint32 // the top-level transaction
	FirstSegment bool
}

// Type implements Message.
func (*StreamStart) Type() MessageType { return MessageTypeStreamStart }
