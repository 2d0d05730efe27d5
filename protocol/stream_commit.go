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

// Decode parses a complete Stream Commit message: xid not 0, flags 0 (as
// proto.c checks) and, as for Commit, both LSNs set.
func (dst *StreamCommit) Decode(src []byte) error {
	var r reader
	r.start(src, MessageTypeStreamCommit)
	dst.Xid = r.xid("xid")
	dst.Flags = r.flags("flags", 0)
	dst.CommitLSN = r.validLSN("commit LSN")
	dst.EndLSN = r.validLSN("end LSN")
	dst.CommitTime = r.timestamp("commit time")
	return r.finish()
}
