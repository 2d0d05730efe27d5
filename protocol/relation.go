package protocol

import (
	"fmt"
	"strconv"
)

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

// minRelationColumnSize is the smallest encoding of a column: flags, an
// empty name's NUL, type OID and typmod.
const minRelationColumnSize = 1 + 1 + 4 + 4

// Decode parses a complete Relation message. The replica identity must be
// one of d, n, f, i; column flags may only have ColumnFlagKey set (proto.c
// tests only that bit, but no server sends others); the relation and column
// type OIDs must not be 0. Columns is a fresh slice every time.
func (dst *Relation) Decode(src []byte) error {
	var r reader
	r.start(src, MessageTypeRelation)
	dst.Xid = r.streamXid(dst.Streamed)
	dst.RelationID = r.oid("relation OID")
	dst.Namespace = r.cstring("namespace")
	dst.Name = r.cstring("name")
	off := r.off
	dst.ReplicaIdentity = r.uint8("replica identity")
	if r.ok() {
		switch dst.ReplicaIdentity {
		case ReplicaIdentityDefault, ReplicaIdentityNothing, ReplicaIdentityFull, ReplicaIdentityIndex:
		default:
			r.failAt("replica identity", off, fmt.Errorf("%w: replica identity %s", ErrInvalidValue, describeByte(dst.ReplicaIdentity)))
		}
	}
	off = r.off
	n := int(r.int16("column count"))
	dst.Columns = nil
	if !r.ok() {
		return r.finish()
	}
	if n < 0 {
		r.failAt("column count", off, fmt.Errorf("%w: %d columns", ErrBadLength, n))
		return r.finish()
	}
	if n*minRelationColumnSize > r.remaining() {
		r.failAt("column count", off, fmt.Errorf("%w: %d columns in %d bytes", ErrShortMessage, n, r.remaining()))
		return r.finish()
	}
	cols := make([]RelationColumn, n)
	for i := range cols {
		// Relation messages are rare and allocate anyway; naming the
		// fields up front keeps the errors precise.
		p := "column " + strconv.Itoa(i) + " "
		c := &cols[i]
		c.Flags = r.flags(p+"flags", ColumnFlagKey)
		c.Name = r.cstring(p + "name")
		c.TypeOID = r.oid(p + "type OID")
		c.TypeMod = r.int32(p + "type modifier")
	}
	dst.Columns = cols
	return r.finish()
}
