package protocol

import (
	"encoding/binary"
	"fmt"
)

// Column kinds in TupleData.
const (
	ColumnNull      byte = 'n'
	ColumnUnchanged byte = 'u' // unchanged TOASTed value: keep the current one
	ColumnText      byte = 't'
	ColumnBinary    byte = 'b'
)

// TupleColumn is one column of a TupleData. Data is nil for 'n' and 'u' and
// aliases the decoded message for 't' and 'b'.
type TupleColumn struct {
	Kind byte
	Data []byte
}

// TupleData is a row image: one TupleColumn per published column, in the
// order of the relation's Relation message. Decoding reuses Columns'
// backing array, so a warm TupleData decodes without allocating.
type TupleData struct {
	Columns []TupleColumn
}

// decode reads a TupleData (Int16 column count, then one column each) at
// r's position. which ("new tuple", "old tuple") prefixes the field names in
// errors. Columns' backing array is reused and only grown when a row has more
// columns than any before it; Data slices alias r.src.
func (t *TupleData) decode(r *reader, which string) {
	if r.err != nil {
		return
	}
	countOff := r.off
	if r.remaining() < 2 {
		r.failAt(which+" column count", countOff, ErrShortMessage)
		return
	}
	n := int(int16(binary.BigEndian.Uint16(r.src[r.off:])))
	r.off += 2
	if n < 0 {
		r.failAt(which+" column count", countOff, fmt.Errorf("%w: %d columns", ErrBadLength, n))
		return
	}
	// Every column takes at least its kind byte, so a count beyond the
	// remaining bytes is a short message; checking first also keeps a bogus
	// count from making us allocate.
	if n > r.remaining() {
		r.failAt(which+" column count", countOff, fmt.Errorf("%w: %d columns in %d bytes", ErrShortMessage, n, r.remaining()))
		return
	}
	if cap(t.Columns) < n {
		t.Columns = make([]TupleColumn, n)
	} else {
		t.Columns = t.Columns[:n]
	}
	src := r.src
	off := r.off
	for i := range t.Columns {
		c := &t.Columns[i]
		if off >= len(src) {
			r.failAt(tupleField(which, i, "kind"), off, ErrShortMessage)
			return
		}
		c.Kind = src[off]
		off++
		switch c.Kind {
		case ColumnNull, ColumnUnchanged:
			c.Data = nil
		case ColumnText, ColumnBinary:
			if len(src)-off < 4 {
				r.failAt(tupleField(which, i, "length"), off, ErrShortMessage)
				return
			}
			l := int32(binary.BigEndian.Uint32(src[off:]))
			if l < 0 {
				r.failAt(tupleField(which, i, "length"), off, fmt.Errorf("%w: %d", ErrBadLength, l))
				return
			}
			off += 4
			if int64(len(src)-off) < int64(l) {
				r.failAt(tupleField(which, i, "value"), off, fmt.Errorf("%w: %d bytes wanted, %d left", ErrShortMessage, l, len(src)-off))
				return
			}
			end := off + int(l)
			c.Data = src[off:end:end]
			off = end
		default:
			r.failAt(tupleField(which, i, "kind"), off-1, fmt.Errorf("%w %s", ErrUnknownTupleKind, describeByte(c.Kind)))
			return
		}
	}
	r.off = off
}

// tupleField names a tuple column field for an error; only called on the
// error path, so its allocation does not matter.
func tupleField(which string, col int, what string) string {
	return fmt.Sprintf("%s column %d %s", which, col, what)
}
