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

// Decode parses a complete Commit message. proto.c checks only the flags;
// this decoder also requires both LSNs to be set, because the end LSN is
// what the subscriber records as its progress and confirms to the server.
func (dst *Commit) Decode(src []byte) error {
	var r reader
	r.start(src, MessageTypeCommit)
	dst.Flags = r.flags("flags", 0)
	dst.CommitLSN = r.validLSN("commit LSN")
	dst.EndLSN = r.validLSN("end LSN")
	dst.CommitTime = r.timestamp("commit time")
	return r.finish()
}
