package protocol

// StreamCommit commits a streamed transaction ('c').
type StreamCommit struct {
	Xid        uint32
	Flags      uint8 // must be 0
	CommitLSN  LSN
	EndLSN     LSN
	CommitTime Timestamp
}

// Type implements Message.
func (*StreamCommit) Type() MessageType { return MessageTypeStreamCommit }
