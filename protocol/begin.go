package protocol

// Begin starts a transaction ('B').
type Begin struct {
	FinalLSN   LSN // the LSN of the commit record; never 0
	CommitTime Timestamp
	Xid        uint32
}

// Type implements Message.
func (*Begin) Type() MessageType { return MessageTypeBegin }

// Decode parses a complete Begin message. Beyond proto.c's check that the
// final LSN is set, it also rejects xid 0: pgoutput only ever begins a
// transaction that has an xid.
func (dst *Begin) Decode(src []byte) error {
	var r reader
	r.start(src, MessageTypeBegin)
	dst.FinalLSN = r.validLSN("final LSN")
	dst.CommitTime = r.timestamp("commit time")
	dst.Xid = r.xid("xid")
	return r.finish()
}
