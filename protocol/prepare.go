package protocol

// Prepare ends a transaction with PREPARE TRANSACTION ('P').
type Prepare struct {
	Flags       uint8 // must be 0
	PrepareLSN  LSN
	EndLSN      LSN
	PrepareTime Timestamp
	Xid         uint32
	GID         string
}

// Type implements Message.
func (*Prepare) Type() MessageType { return MessageTypePrepare }
