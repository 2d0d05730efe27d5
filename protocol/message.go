package protocol

// MessageType is the first byte of a pgoutput message.
type MessageType byte

// The pgoutput message types (logicalproto.h, LogicalRepMsgType).
const (
	MessageTypeBegin            MessageType = 'B'
	MessageTypeMessage          MessageType = 'M'
	MessageTypeCommit           MessageType = 'C'
	MessageTypeOrigin           MessageType = 'O'
	MessageTypeRelation         MessageType = 'R'
	MessageTypeType             MessageType = 'Y'
	MessageTypeInsert           MessageType = 'I'
	MessageTypeUpdate           MessageType = 'U'
	MessageTypeDelete           MessageType = 'D'
	MessageTypeTruncate         MessageType = 'T'
	MessageTypeStreamStart      MessageType = 'S'
	MessageTypeStreamStop       MessageType = 'E'
	MessageTypeStreamCommit     MessageType = 'c'
	MessageTypeStreamAbort      MessageType = 'A'
	MessageTypeBeginPrepare     MessageType = 'b'
	MessageTypePrepare          MessageType = 'P'
	MessageTypeCommitPrepared   MessageType = 'K'
	MessageTypeRollbackPrepared MessageType = 'r'
	MessageTypeStreamPrepare    MessageType = 'p'
)

// String names the message type as the protocol documentation does.
func (t MessageType) String() string {
	switch t {
	case MessageTypeBegin:
		return "Begin"
	case MessageTypeMessage:
		return "Message"
	case MessageTypeCommit:
		return "Commit"
	case MessageTypeOrigin:
		return "Origin"
	case MessageTypeRelation:
		return "Relation"
	case MessageTypeType:
		return "Type"
	case MessageTypeInsert:
		return "Insert"
	case MessageTypeUpdate:
		return "Update"
	case MessageTypeDelete:
		return "Delete"
	case MessageTypeTruncate:
		return "Truncate"
	case MessageTypeStreamStart:
		return "Stream Start"
	case MessageTypeStreamStop:
		return "Stream Stop"
	case MessageTypeStreamCommit:
		return "Stream Commit"
	case MessageTypeStreamAbort:
		return "Stream Abort"
	case MessageTypeBeginPrepare:
		return "Begin Prepare"
	case MessageTypePrepare:
		return "Prepare"
	case MessageTypeCommitPrepared:
		return "Commit Prepared"
	case MessageTypeRollbackPrepared:
		return "Rollback Prepared"
	case MessageTypeStreamPrepare:
		return "Stream Prepare"
	}
	return "unknown"
}

// Message is one decoded pgoutput message.
type Message interface {
	// Type returns the message's type byte.
	Type() MessageType
	// Decode parses a complete message, type byte included, into the
	// receiver. See the package doc for how long decoded slices stay valid.
	Decode(src []byte) error
}

// Replica identity settings, as pg_class.relreplident.
const (
	ReplicaIdentityDefault byte = 'd'
	ReplicaIdentityNothing byte = 'n'
	ReplicaIdentityFull    byte = 'f'
	ReplicaIdentityIndex   byte = 'i'
)

// Tuple markers in Insert, Update and Delete.
const (
	TupleNew    byte = 'N'
	TupleOldKey byte = 'K'
	TupleOld    byte = 'O'
)

// Truncate option bits.
const (
	TruncateCascade         uint8 = 1 << 0
	TruncateRestartIdentity uint8 = 1 << 1
)

// LogicalMessage flag bits.
const (
	MessageTransactional uint8 = 1 << 0
)

// Column flag bits in a Relation message.
const (
	ColumnFlagKey uint8 = 1 << 0
)

// RowRelation returns the relation of a row change (Insert, Update or
// Delete); ok is false for every other message, Truncate included, which
// names several.
func RowRelation(msg Message) (relid uint32, ok bool) {
	switch m := msg.(type) {
	case *Insert:
		return m.RelationID, true
	case *Update:
		return m.RelationID, true
	case *Delete:
		return m.RelationID, true
	}
	return 0, false
}
