package protocol

// StreamPrepare prepares a streamed transaction ('p'); same layout as Prepare.
type StreamPrepare struct {
	Flags       uint8 // must be 0
	PrepareLSN  LSN
	EndLSN      LSN
	PrepareTime Timestamp
	Xid         uint32
	GID         string
}

// Type implements Message.
func (*StreamPrepare) Type() MessageType { return MessageTypeStreamPrepare }
