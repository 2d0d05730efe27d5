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
// # Strictness
//
// The decoders enforce every check PostgreSQL's own reader (proto.c) makes,
// and some it does not, because a real server never sends what they reject
// and an applier acting on such a message would corrupt the target (see
// errors.go for the error classes):
//
//   - no bytes may be left over after the last field;
//   - transaction IDs are never 0 (Begin, streamed changes, every stream
//     and two-phase message), nor are relation and type OIDs;
//   - Commit and Stream Commit need both LSNs set, like the two-phase
//     messages (proto.c checks only Begin's and the two-phase ones);
//   - the Relation replica identity is one of d, n, f, i, and column flags
//     have no bit but ColumnFlagKey;
//   - a Message's flags are 0 or MessageTransactional;
//   - Truncate has at least one relation and no option bit beyond CASCADE
//     and RESTART IDENTITY (proto.c ignores unknown bits; a future option
//     could change what the TRUNCATE means, so it is refused instead);
//   - Stream Start's first-segment byte is 0 or 1;
//   - lengths and counts are never negative, and never larger than what
//     is left of the message, which is checked before anything is
//     allocated for them.
//
// The Decoder adds what only the position in the stream can tell: message
// types the negotiated protocol version lacks, Stream Start … Stream Stop
// nesting, which messages may appear inside a block, and that a
// non-transactional Message never does.
//
// # Lifetime of decoded data
//
// Byte slices in a decoded message (tuple column values, logical message
// content) alias src: they stay valid only as long as src does, and the
// Decoder reuses its message values, so a message returned by Decoder.Decode
// is valid until the next call. Strings (relation, namespace, column and type
// names, GIDs, origin names, message prefixes) are copied and may be kept.
// Relation and Type values are freshly allocated by each Decoder.Decode (and
// a Relation's Columns by each Relation.Decode) and may be retained.
package protocol
