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

// Decode parses a complete Begin Prepare message: both LSNs must be set (as
// proto.c checks) and the xid must not be 0.
func (dst *BeginPrepare) Decode(src []byte) error {
	var r reader
	r.start(src, MessageTypeBeginPrepare)
	dst.PrepareLSN = r.validLSN("prepare LSN")
	dst.EndLSN = r.validLSN("end LSN")
	dst.PrepareTime = r.timestamp("prepare time")
	dst.Xid = r.xid("xid")
	dst.GID = r.cstring("gid")
	return r.finish()
}
