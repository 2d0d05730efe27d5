// Package protocol decodes PostgreSQL's logical replication protocol (the
// pgoutput plugin, protocol versions 1 to 4) and speaks the replication
// connection built on github.com/jackc/pglogrepl.
//
// # Decoding
//
// Each message type lives in a file of its own and has a method
//
//	func (dst *X) Decode(src []byte) error
//
// that parses one complete pgoutput message (type byte included) into dst.
// Every read is bounds-checked: a short message, bytes left over, an unknown
// kind byte, nonzero flags where the protocol says 0, or an invalid LSN where
// one is required is a *DecodeError naming the message and the field, never a
// panic (DESIGN.md invariant 6).
//
// Messages that carry the optional streamed-transaction xid (Relation, Type,
// Insert, Update, Delete, Truncate, LogicalMessage) read it only when their
// Streamed field is true; the caller sets it before Decode from its own
// knowledge of whether it is inside a Stream Start … Stream Stop block. The
// Decoder type does this bookkeeping.
//
// # Lifetime of decoded data
//
// Byte slices in a decoded message (tuple column values, logical message
// content) alias src: they stay valid only as long as src does, and the
// Decoder reuses its message values, so a message returned by Decoder.Decode
// is valid until the next call. Strings (relation, namespace, column and type
// names, GIDs, origin names, message prefixes) are copied and may be kept.
// Relation and Type values are freshly allocated by each Decode and may be
// retained.
package protocol
