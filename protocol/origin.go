package protocol

// Origin names the replication origin a transaction came from ('O').
type Origin struct {
	CommitLSN LSN // the commit LSN on the origin server; 0 inside a stream
	Name      string
}

// Type implements Message.
func (*Origin) Type() MessageType { return MessageTypeOrigin }
