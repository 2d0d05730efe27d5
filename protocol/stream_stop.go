package protocol

// StreamStop closes a stream block ('E').
type StreamStop struct{}

// Type implements Message.
func (*StreamStop) Type() MessageType { return MessageTypeStreamStop }
