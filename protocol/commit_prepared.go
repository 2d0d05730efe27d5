package protocol

// CommitPrepared commits an earlier prepared transaction ('K').
type CommitPrepared struct {
	Flags      uint8 // must be 0
	CommitLSN  LSN
	EndLSN     LSN
	CommitTime Timestamp
	Xid        uint32
	GID        string
}

// Type implements Message.
func (*CommitPrepared) Type() MessageType { return MessageTypeCommitPrepared }
