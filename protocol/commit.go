package protocol

// Commit ends a transaction ('C').
type Commit struct {
	Flags      uint8 // must be 0
	CommitLSN  LSN
	EndLSN     LSN // end of the commit record: the position to confirm once applied
	CommitTime Timestamp
}

// Type implements Message.
func (*Commit) Type() MessageType { return MessageTypeCommit }
