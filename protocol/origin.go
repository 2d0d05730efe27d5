package protocol

// Origin names the replication origin a transaction came from ('O').
type Origin struct {
	CommitLSN LSN // the commit LSN on the origin server; 0 inside a stream
	Name      string
}

// Type implements Message.
func (*Origin) Type() MessageType { return MessageTypeOrigin }

// Decode parses a complete Origin message. The commit LSN may be 0: pgoutput
// sends 0 for the Origin that follows the first Stream Start of a streamed
// transaction.
func (dst *Origin) Decode(src []byte) error {
	var r reader
	r.start(src, MessageTypeOrigin)
	dst.CommitLSN = r.lsn("commit LSN")
	dst.Name = r.cstring("name")
	return r.finish()
}
