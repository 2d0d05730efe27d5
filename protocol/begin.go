package protocol

// Begin starts a transaction ('B').
type Begin struct {
	FinalLSN   LSN // the LSN of the commit record; never 0
	CommitTime Timestamp
	Xid        uint32
}

// Type implements Message.
func (*Begin) Type() MessageType { return MessageTypeBegin }
