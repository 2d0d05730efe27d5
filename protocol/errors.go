package protocol

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Every decoding failure is a *DecodeError whose Err wraps
// exactly one of these, so callers test the class with errors.Is and read
// the message, field and offset from the DecodeError.
//
// All of them mean the byte stream cannot be trusted any more: pgoutput
// messages carry no length of their own, so there is nothing to resynchronise
// on, and the replication connection has to be restarted from the last
// durable position.
var (
	// ErrShortMessage: a field, string or value runs past the end of the
	// message (a C string without its NUL terminator included).
	ErrShortMessage = errors.New("protocol: message too short")
	// ErrTrailingBytes: the message has bytes left after its last field.
	ErrTrailingBytes = errors.New("protocol: trailing bytes after message")
	// ErrUnknownMessageType: the type byte is not a pgoutput message type.
	ErrUnknownMessageType = errors.New("protocol: unknown message type")
	// ErrWrongMessageType: a type's Decode was given another type's message.
	ErrWrongMessageType = errors.New("protocol: wrong message type")
	// ErrUnknownTupleKind: a TupleData column kind other than n, u, t or b.
	ErrUnknownTupleKind = errors.New("protocol: unknown tuple column kind")
	// ErrNonzeroFlags: a flags or options field has bits set that the
	// protocol does not define (for Commit, Prepare and friends: any bit).
	ErrNonzeroFlags = errors.New("protocol: undefined flag bits set")
	// ErrInvalidLSN: an LSN the protocol requires is 0/0.
	ErrInvalidLSN = errors.New("protocol: invalid LSN 0/0")
	// ErrInvalidXid: a transaction ID is 0 (InvalidTransactionId).
	ErrInvalidXid = errors.New("protocol: invalid transaction ID 0")
	// ErrBadMarker: an Insert, Update or Delete tuple marker is not one of
	// the N, K, O the message allows at that point.
	ErrBadMarker = errors.New("protocol: unexpected tuple marker")
	// ErrBadLength: a count or length is negative or cannot be right.
	ErrBadLength = errors.New("protocol: invalid length")
	// ErrInvalidValue: a field holds a value outside its domain (replica
	// identity, first-segment byte, an OID of 0).
	ErrInvalidValue = errors.New("protocol: invalid field value")
	// ErrUnsupportedByVersion: the message type does not exist in the
	// negotiated protocol version.
	ErrUnsupportedByVersion = errors.New("protocol: message type not in the negotiated protocol version")
	// ErrStreamFraming: the message is not allowed where it appears with
	// respect to Stream Start … Stream Stop blocks.
	ErrStreamFraming = errors.New("protocol: stream framing violated")
)

// DecodeError reports a message that could not be decoded: which message,
// which field, where in the message (byte offset from the type byte) and
// why. Err wraps one of the package's sentinel errors.
//
// Tuple fields are named like "new tuple column 3 length", where 3 is the
// zero-based index into TupleData.Columns. Field is empty when the error is
// about the message as a whole (trailing bytes, stream framing).
type DecodeError struct {
	Message MessageType // 0 when src was empty
	Field   string
	Offset  int
	Err     error
}

// Error formats the error as
//
//	protocol: decoding Insert: field "new tuple column 3 length" at offset 17: message too short
func (e *DecodeError) Error() string {
	var b strings.Builder
	b.WriteString("protocol: decoding ")
	b.WriteString(messageName(e.Message))
	if e.Field != "" {
		fmt.Fprintf(&b, ": field %q", e.Field)
	}
	fmt.Fprintf(&b, " at offset %d: ", e.Offset)
	if e.Err != nil {
		b.WriteString(strings.TrimPrefix(e.Err.Error(), "protocol: "))
	} else {
		b.WriteString("unknown error")
	}
	return b.String()
}

// Unwrap returns the cause, which wraps a sentinel error.
func (e *DecodeError) Unwrap() error { return e.Err }

// messageName names a message type for an error message, including type
// bytes that are not pgoutput messages.
func messageName(t MessageType) string {
	if t == 0 {
		return "message"
	}
	if s := t.String(); s != "unknown" {
		return s
	}
	return "message type " + describeByte(byte(t))
}

// describeByte shows a byte from the wire as 'x' (0x78), or as 0x01 when it
// is not printable ASCII.
func describeByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return fmt.Sprintf("'%c' (0x%02x)", c, c)
	}
	return fmt.Sprintf("0x%02x", c)
}
