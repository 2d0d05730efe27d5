package protocol

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// reader reads the fields of one message in order, checking bounds before
// every read. The first failure is kept in err and every later read returns
// a zero value, so a Decode method reads all its fields straight through and
// asks finish for the verdict once. Checks on values (flags, LSNs, xids) are
// made by the typed helpers below, right where the field is read, so that
// the DecodeError names the field and its offset.
//
// A reader lives on the stack of a Decode call; it allocates only when it
// records an error.
type reader struct {
	src []byte
	off int
	msg MessageType
	err error
}

// start prepares r to decode src as a message of type msg and consumes the
// type byte.
func (r *reader) start(src []byte, msg MessageType) {
	*r = reader{src: src, msg: msg}
	if len(src) == 0 {
		r.failAt("message type", 0, ErrShortMessage)
		return
	}
	if got := MessageType(src[0]); got != msg {
		r.failAt("message type", 0, fmt.Errorf("%w: got %s", ErrWrongMessageType, messageName(got)))
		return
	}
	r.off = 1
}

// failAt records the first error.
func (r *reader) failAt(field string, off int, err error) {
	if r.err == nil {
		r.err = &DecodeError{Message: r.msg, Field: field, Offset: off, Err: err}
	}
}

// ok reports whether no error has been recorded yet.
func (r *reader) ok() bool { return r.err == nil }

// remaining is the number of unread bytes.
func (r *reader) remaining() int { return len(r.src) - r.off }

// need reports whether n more bytes can be read, recording ErrShortMessage
// for field if not.
func (r *reader) need(n int, field string) bool {
	if r.err != nil {
		return false
	}
	if r.remaining() < n {
		r.failAt(field, r.off, ErrShortMessage)
		return false
	}
	return true
}

func (r *reader) uint8(field string) uint8 {
	if !r.need(1, field) {
		return 0
	}
	v := r.src[r.off]
	r.off++
	return v
}

func (r *reader) int16(field string) int16 {
	if !r.need(2, field) {
		return 0
	}
	v := int16(binary.BigEndian.Uint16(r.src[r.off:]))
	r.off += 2
	return v
}

func (r *reader) uint32(field string) uint32 {
	if !r.need(4, field) {
		return 0
	}
	v := binary.BigEndian.Uint32(r.src[r.off:])
	r.off += 4
	return v
}

func (r *reader) int32(field string) int32 { return int32(r.uint32(field)) }

func (r *reader) uint64(field string) uint64 {
	if !r.need(8, field) {
		return 0
	}
	v := binary.BigEndian.Uint64(r.src[r.off:])
	r.off += 8
	return v
}

func (r *reader) lsn(field string) LSN { return LSN(r.uint64(field)) }

func (r *reader) timestamp(field string) Timestamp { return Timestamp(r.uint64(field)) }

// validLSN reads an LSN that must not be 0/0.
func (r *reader) validLSN(field string) LSN {
	off := r.off
	v := r.lsn(field)
	if r.err == nil && v == InvalidLSN {
		r.failAt(field, off, ErrInvalidLSN)
	}
	return v
}

// xid reads a transaction ID that must not be 0. pgoutput writes xids only
// from valid transactions, so 0 means a corrupt or foreign stream.
func (r *reader) xid(field string) uint32 {
	off := r.off
	v := r.uint32(field)
	if r.err == nil && v == 0 {
		r.failAt(field, off, ErrInvalidXid)
	}
	return v
}

// oid reads an object ID that must not be 0 (InvalidOid): relation and type
// OIDs are keys of the subscriber's caches, and the server never sends 0.
func (r *reader) oid(field string) uint32 {
	off := r.off
	v := r.uint32(field)
	if r.err == nil && v == 0 {
		r.failAt(field, off, fmt.Errorf("%w: OID 0", ErrInvalidValue))
	}
	return v
}

// flags reads a flags byte that may only have bits in allowed set.
func (r *reader) flags(field string, allowed uint8) uint8 {
	off := r.off
	v := r.uint8(field)
	if r.err == nil && v&^allowed != 0 {
		r.failAt(field, off, fmt.Errorf("%w: 0x%02x", ErrNonzeroFlags, v))
	}
	return v
}

// cstring reads a NUL-terminated string and copies it, so the result does
// not keep src alive.
func (r *reader) cstring(field string) string {
	if r.err != nil {
		return ""
	}
	i := bytes.IndexByte(r.src[r.off:], 0)
	if i < 0 {
		r.failAt(field, r.off, fmt.Errorf("%w: string has no NUL terminator", ErrShortMessage))
		return ""
	}
	s := string(r.src[r.off : r.off+i])
	r.off += i + 1
	return s
}

// bytesN returns the next n bytes as a slice of src whose capacity ends at
// its length, so that an append by the caller cannot overwrite src.
func (r *reader) bytesN(n int, field string) []byte {
	if !r.need(n, field) {
		return nil
	}
	b := r.src[r.off : r.off+n : r.off+n]
	r.off += n
	return b
}

// finish reports the first error, or ErrTrailingBytes if the message has
// bytes after its last field.
func (r *reader) finish() error {
	if r.err == nil && r.off != len(r.src) {
		r.failAt("", r.off, fmt.Errorf("%w: %d extra", ErrTrailingBytes, len(r.src)-r.off))
	}
	return r.err
}

// streamXid reads the Int32 xid that messages inside a stream block carry,
// or returns 0 without reading when streamed is false.
func (r *reader) streamXid(streamed bool) uint32 {
	if !streamed {
		return 0
	}
	return r.xid("xid")
}
