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

// Decode parses a complete Commit Prepared message: flags 0, both LSNs set
// (proto.c's checks) and xid not 0.
func (dst *CommitPrepared) Decode(src []byte) error {
	var r reader
	r.start(src, MessageTypeCommitPrepared)
	dst.Flags = r.flags("flags", 0)
	dst.CommitLSN = r.validLSN("commit LSN")
	dst.EndLSN = r.validLSN("end LSN")
	dst.CommitTime = r.timestamp("commit time")
	dst.Xid = r.xid("xid")
	dst.GID = r.cstring("gid")
	return r.finish()
}
