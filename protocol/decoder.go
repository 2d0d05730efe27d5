package protocol

import "fmt"

// DecoderOptions tell a Decoder what the server was asked for.
type DecoderOptions struct {
	ProtoVersion int // 1 to 4
	// StreamingParallel: streaming = parallel was requested, so Stream Abort
	// carries the abort LSN and time.
	StreamingParallel bool
}

// Decoder decodes a stream of pgoutput messages. It knows the protocol
// version and whether it is inside a Stream Start … Stream Stop block, sets
// Streamed / WithAbortInfo on the messages that need it, rejects message
// types the negotiated protocol version does not have and stream framing
// errors (Stream Start inside a block, Stream Stop outside one, Stream
// Commit/Abort/Prepare inside one).
//
// It reuses one value per message type: a returned Message is valid until the
// next call to Decode or DecodeStreamedChange. Relation and TypeMessage are
// the exception: they are allocated afresh by every decode, so the applier's
// caches may keep the pointers (they are rare, so this costs nothing).
//
// The Decoder is a pure state machine over byte slices; the replication
// connection feeds it XLogData payloads. It checks only what a single
// message and the block state can tell. Transaction framing (Begin before
// Commit, Relation before DML, Origin placement) is the applier's job, since
// the applier holds the state that decides it.
//
// After an error the stream cannot be trusted: reconnect and call Reset.
type Decoder struct {
	opts      DecoderOptions
	inStream  bool
	streamXid uint32

	begin            Begin
	commit           Commit
	origin           Origin
	insert           Insert
	update           Update
	delete           Delete
	truncate         Truncate
	message          LogicalMessage
	streamStart      StreamStart
	streamStop       StreamStop
	streamCommit     StreamCommit
	streamAbort      StreamAbort
	beginPrepare     BeginPrepare
	prepare          Prepare
	commitPrepared   CommitPrepared
	rollbackPrepared RollbackPrepared
	streamPrepare    StreamPrepare
}

// Protocol versions that introduced message types (logicalproto.h).
const (
	minProtoVersion      = 1
	streamProtoVersion   = 2 // Stream Start/Stop/Commit/Abort
	twoPhaseProtoVersion = 3 // Begin Prepare, Prepare, Commit/Rollback Prepared, Stream Prepare
	parallelProtoVersion = 4 // streaming = parallel: abort info in Stream Abort
	maxProtoVersion      = 4
)

// NewDecoder returns a Decoder for a stream started with the given options.
// It fails if ProtoVersion is outside 1 to 4, or if StreamingParallel is set
// with a version below 4 (the server would have refused it).
func NewDecoder(opts DecoderOptions) (*Decoder, error) {
	if opts.ProtoVersion < minProtoVersion || opts.ProtoVersion > maxProtoVersion {
		return nil, fmt.Errorf("protocol: new decoder: proto_version %d is not between %d and %d", opts.ProtoVersion, minProtoVersion, maxProtoVersion)
	}
	if opts.StreamingParallel && opts.ProtoVersion < parallelProtoVersion {
		return nil, fmt.Errorf("protocol: new decoder: streaming = parallel needs proto_version %d, have %d", parallelProtoVersion, opts.ProtoVersion)
	}
	return &Decoder{opts: opts}, nil
}

// Options returns the options the Decoder was created with.
func (d *Decoder) Options() DecoderOptions { return d.opts }

// InStream reports whether the Decoder is inside a Stream Start … Stream
// Stop block.
func (d *Decoder) InStream() bool { return d.inStream }

// StreamXid is the top-level xid of the current stream block, or 0 outside
// one.
func (d *Decoder) StreamXid() uint32 { return d.streamXid }

// Reset forgets the stream block state, for a new replication connection:
// the server starts every connection outside a block.
func (d *Decoder) Reset() {
	d.inStream = false
	d.streamXid = 0
}

// minVersion is the protocol version that introduced t, or 0 if t is not a
// pgoutput message type.
func minVersion(t MessageType) int {
	switch t {
	case MessageTypeBegin, MessageTypeMessage, MessageTypeCommit, MessageTypeOrigin,
		MessageTypeRelation, MessageTypeType, MessageTypeInsert, MessageTypeUpdate,
		MessageTypeDelete, MessageTypeTruncate:
		return minProtoVersion
	case MessageTypeStreamStart, MessageTypeStreamStop, MessageTypeStreamCommit, MessageTypeStreamAbort:
		return streamProtoVersion
	case MessageTypeBeginPrepare, MessageTypePrepare, MessageTypeCommitPrepared,
		MessageTypeRollbackPrepared, MessageTypeStreamPrepare:
		return twoPhaseProtoVersion
	}
	return 0
}

// allowedInBlock reports whether pgoutput may send t between Stream Start
// and Stream Stop.
func allowedInBlock(t MessageType) bool {
	switch t {
	case MessageTypeOrigin, MessageTypeRelation, MessageTypeType, MessageTypeInsert,
		MessageTypeUpdate, MessageTypeDelete, MessageTypeTruncate, MessageTypeMessage,
		MessageTypeStreamStop:
		return true
	}
	return false
}

// checkType rejects an empty message, an unknown type byte and a type the
// negotiated version does not have.
func (d *Decoder) checkType(src []byte) (MessageType, error) {
	if len(src) == 0 {
		return 0, &DecodeError{Field: "message type", Err: ErrShortMessage}
	}
	t := MessageType(src[0])
	v := minVersion(t)
	if v == 0 {
		return t, &DecodeError{Message: t, Field: "message type", Err: ErrUnknownMessageType}
	}
	if v > d.opts.ProtoVersion {
		return t, &DecodeError{Message: t, Field: "message type", Err: fmt.Errorf("%w: %s needs protocol version %d, negotiated %d", ErrUnsupportedByVersion, t, v, d.opts.ProtoVersion)}
	}
	return t, nil
}

func framingError(t MessageType, what string) error {
	return &DecodeError{Message: t, Err: fmt.Errorf("%w: %s %s", ErrStreamFraming, t, what)}
}

// Decode decodes one complete pgoutput message (one XLogData payload) and
// updates the stream block state. On error it returns a nil Message and a
// *DecodeError, and the block state is unchanged.
func (d *Decoder) Decode(src []byte) (Message, error) {
	t, err := d.checkType(src)
	if err != nil {
		return nil, err
	}
	switch {
	case t == MessageTypeStreamStart && d.inStream:
		return nil, framingError(t, "inside a stream block (blocks do not nest)")
	case t == MessageTypeStreamStop && !d.inStream:
		return nil, framingError(t, "outside a stream block")
	case d.inStream && !allowedInBlock(t):
		return nil, framingError(t, "inside a stream block")
	}
	switch t {
	case MessageTypeStreamStart:
		if err := d.streamStart.Decode(src); err != nil {
			return nil, err
		}
		d.inStream, d.streamXid = true, d.streamStart.Xid
		return &d.streamStart, nil
	case MessageTypeStreamStop:
		if err := d.streamStop.Decode(src); err != nil {
			return nil, err
		}
		d.inStream, d.streamXid = false, 0
		return &d.streamStop, nil
	}
	return d.decode(t, src, d.inStream)
}

// DecodeStreamedChange decodes one message that was received inside a stream
// block, as streamed (with its xid), without looking at or changing the
// block state. It is for replaying changes spilled to disk at Stream Commit
// or Stream Prepare time. Only the types pgoutput sends inside a block are
// accepted: Relation, Type, Insert, Update, Delete, Truncate, Message and
// Origin.
func (d *Decoder) DecodeStreamedChange(src []byte) (Message, error) {
	t, err := d.checkType(src)
	if err != nil {
		return nil, err
	}
	if d.opts.ProtoVersion < streamProtoVersion {
		return nil, &DecodeError{Message: t, Err: fmt.Errorf("%w: streamed changes need protocol version %d, negotiated %d", ErrUnsupportedByVersion, streamProtoVersion, d.opts.ProtoVersion)}
	}
	if t == MessageTypeStreamStop || !allowedInBlock(t) {
		return nil, framingError(t, "is not a change inside a stream block")
	}
	return d.decode(t, src, true)
}

// decode decodes every type that does not change the block state.
func (d *Decoder) decode(t MessageType, src []byte, streamed bool) (Message, error) {
	var m Message
	switch t {
	case MessageTypeBegin:
		m = &d.begin
	case MessageTypeCommit:
		m = &d.commit
	case MessageTypeOrigin:
		m = &d.origin
	case MessageTypeRelation:
		m = &Relation{Streamed: streamed}
	case MessageTypeType:
		m = &TypeMessage{Streamed: streamed}
	case MessageTypeInsert:
		d.insert.Streamed = streamed
		m = &d.insert
	case MessageTypeUpdate:
		d.update.Streamed = streamed
		m = &d.update
	case MessageTypeDelete:
		d.delete.Streamed = streamed
		m = &d.delete
	case MessageTypeTruncate:
		d.truncate.Streamed = streamed
		m = &d.truncate
	case MessageTypeMessage:
		d.message.Streamed = streamed
		m = &d.message
	case MessageTypeStreamCommit:
		m = &d.streamCommit
	case MessageTypeStreamAbort:
		d.streamAbort.WithAbortInfo = d.opts.StreamingParallel
		m = &d.streamAbort
	case MessageTypeBeginPrepare:
		m = &d.beginPrepare
	case MessageTypePrepare:
		m = &d.prepare
	case MessageTypeCommitPrepared:
		m = &d.commitPrepared
	case MessageTypeRollbackPrepared:
		m = &d.rollbackPrepared
	case MessageTypeStreamPrepare:
		m = &d.streamPrepare
	default:
		// checkType and the callers leave no other type; keep the
		// promise of never panicking anyway.
		return nil, &DecodeError{Message: t, Field: "message type", Err: ErrUnknownMessageType}
	}
	if err := m.Decode(src); err != nil {
		return nil, err
	}
	// pgoutput sends non-transactional messages immediately, never between
	// Stream Start and Stream Stop, and they carry no xid.
	if t == MessageTypeMessage && streamed && !d.message.Transactional() {
		return nil, framingError(t, "non-transactional inside a stream block")
	}
	return m, nil
}
