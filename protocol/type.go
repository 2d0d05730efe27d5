package protocol

// TypeMessage describes a non-built-in data type ('Y'). For a domain, TypeOID
// is the domain's own OID while Namespace and Name are those of its base type.
type TypeMessage struct {
	Streamed  bool   // set by the caller: read the xid field
	Xid       uint32 // only when Streamed
	TypeOID   uint32
	Namespace string // "" on the wire means pg_catalog; kept as sent
	Name      string
}

// Type implements Message.
func (*TypeMessage) Type() MessageType { return MessageTypeType }

// Decode parses a complete Type message; the type OID must not be 0.
func (dst *TypeMessage) Decode(src []byte) error {
	var r reader
	r.start(src, MessageTypeType)
	dst.Xid = r.streamXid(dst.Streamed)
	dst.TypeOID = r.oid("type OID")
	dst.Namespace = r.cstring("namespace")
	dst.Name = r.cstring("name")
	return r.finish()
}
