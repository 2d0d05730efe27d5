package protocol

// RollbackPrepared rolls back an earlier prepared transaction ('r').
type RollbackPrepared struct {
	Flags          uint8 // must be 0
	PrepareEndLSN  LSN
	RollbackEndLSN LSN
	PrepareTime    Timestamp
	RollbackTime   Timestamp
	Xid            uint32
	GID            string
}

// Type implements Message.
func (*RollbackPrepared) Type() MessageType { return MessageTypeRollbackPrepared }
