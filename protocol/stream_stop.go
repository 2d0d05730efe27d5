package protocol

// StreamStop closes a stream block ('E').
type StreamStop struct{}

// Type implements Message.
func (*StreamStop) Type() MessageType { return MessageTypeStreamStop }

// Decode parses a Stream Stop message, which is the type byte alone.
func (dst *StreamStop) Decode(src []byte) error {
	var r reader
	r.start(src, MessageTypeStreamStop)
	return r.finish()
}
