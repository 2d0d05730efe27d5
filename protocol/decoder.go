package protocol

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
// next call to Decode or DecodeStreamedChange.
//
// API (implemented in the decoder files):
//
//	func NewDecoder(opts DecoderOptions) *Decoder
//	func (d *Decoder) Decode(src []byte) (Message, error)
//	func (d *Decoder) DecodeStreamedChange(src []byte) (Message, error)
//	func (d *Decoder) InStream() bool
//	func (d *Decoder) StreamXid() uint32
//	func (d *Decoder) Reset()
