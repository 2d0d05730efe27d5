package protocol

// BeginPrepare starts a transaction that will be prepared ('b').
type BeginPrepare struct {
	PrepareLSN  LSN
	EndLSN      LSN
	PrepareTime Timestamp
	Xid         uint32
	GID         string
}

// Type implements Message.
func (*BeginPrepare) Type() MessageType { return MessageTypeBeginPrepare }
