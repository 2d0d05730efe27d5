package protocol

// RelationColumn describes one published column of a Relation.
type RelationColumn struct {
	Flags   uint8 // ColumnFlagKey: part of the replica identity
	Name    string
	TypeOID uint32
	TypeMod int32
}

// IsKey reports whether the column is part of the replica identity.
func (c RelationColumn) IsKey() bool { return c.Flags&ColumnFlagKey != 0 }

// Relation describes a table ('R'). Decode allocates fresh strings and a
// fresh Columns slice, so a decoded Relation may be retained.
type Relation struct {
	Streamed        bool   // set by the caller: read the xid field
	Xid             uint32 // only when Streamed
	RelationID      uint32
	Namespace       string // "" on the wire means pg_catalog; kept as sent
	Name            string
	ReplicaIdentity byte // ReplicaIdentityDefault, Nothing, Full or Index
	Columns         []RelationColumn
}

// Type implements Message.
func (*Relation) Type() MessageType { return MessageTypeRelation }
