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

// Decode parses a complete Prepare message with proto.c's checks: flags 0,
// both LSNs set, xid not 0.
func (dst *Prepare) Decode(src []byte) error {
	var r reader
	r.start(src, MessageTypePrepare)
	dst.Flags, dst.PrepareLSN, dst.EndLSN, dst.PrepareTime, dst.Xid, dst.GID = decodePrepareBody(&r)
	return r.finish()
}

// decodePrepareBody reads the fields Prepare and Stream Prepare share (one
// writer and one reader in proto.c as well).
func decodePrepareBody(r *reader) (flags uint8, prepareLSN, endLSN LSN, prepareTime Timestamp, xid uint32, gid string) {
	flags = r.flags("flags", 0)
	prepareLSN = r.validLSN("prepare LSN")
	endLSN = r.validLSN("end LSN")
	prepareTime = r.timestamp("prepare time")
	xid = r.xid("xid")
	gid = r.cstring("gid")
	return
}
