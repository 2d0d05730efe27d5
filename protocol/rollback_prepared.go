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

// Decode parses a complete Rollback Prepared message: flags 0, both LSNs
// set (proto.c's checks) and xid not 0.
func (dst *RollbackPrepared) Decode(src []byte) error {
	var r reader
	r.start(src, MessageTypeRollbackPrepared)
	dst.Flags = r.flags("flags", 0)
	dst.PrepareEndLSN = r.validLSN("prepare end LSN")
	dst.RollbackEndLSN = r.validLSN("rollback end LSN")
	dst.PrepareTime = r.timestamp("prepare time")
	dst.RollbackTime = r.timestamp("rollback time")
	dst.Xid = r.xid("xid")
	dst.GID = r.cstring("gid")
	return r.finish()
}
