package protocol

import "fmt"

// StreamStart opens a block of a streamed in-progress transaction ('S').
type StreamStart struct {
	Xid          uint32 // the top-level transaction
	FirstSegment bool
}

// Type implements Message.
func (*StreamStart) Type() MessageType { return MessageTypeStreamStart }

// Decode parses a complete Stream Start message. proto.c reads any
// first-segment byte other than 1 as false; this decoder accepts only the 0
// and 1 that pgoutput writes.
func (dst *StreamStart) Decode(src []byte) error {
	var r reader
	r.start(src, MessageTypeStreamStart)
	dst.Xid = r.xid("xid")
	off := r.off
	switch first := r.uint8("first segment"); {
	case !r.ok():
	case first <= 1:
		dst.FirstSegment = first == 1
	default:
		r.failAt("first segment", off, fmt.Errorf("%w: %d, want 0 or 1", ErrInvalidValue, first))
	}
	return r.finish()
}
