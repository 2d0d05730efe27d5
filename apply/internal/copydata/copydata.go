// Package copydata encodes rows as the data of COPY ... FROM STDIN, in
// COPY's text format (values escaped, \N for NULL) or its binary format
// (signature, per row a field count and each field's length and
// send-format bytes, trailer), and writes the COPY statement that takes
// them. The applier sends runs of inserts this way: the spill replay and
// the parallel workers from decoded tuples (TupleFormat, AppendTuple),
// compaction's write-out from its net rows (RowsFormat, AppendRows). It is
// apart from apply so that the encoding is tested on its own; it holds no
// connection.
package copydata

import (
	"encoding/binary"
	"strings"

	"github.com/walapply/walapply/apply/internal/compact"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/protocol"
)

// BinaryHeader starts the data of a binary COPY: signature, flags,
// header extension length.
var BinaryHeader = []byte("PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00")

// BinaryTrailer ends the data of a binary COPY: a field count of -1.
var BinaryTrailer = []byte{0xff, 0xff}

// SQL returns the COPY statement for a relation's written columns; ok is
// false when inserts into the relation cannot go by COPY: no column is
// written, or the table has row-level security enabled (COPY FROM refuses
// it for a role the policies apply to, where INSERT applies them).
func SQL(e *relmap.Entry, format byte) (sql string, ok bool) {
	if e.Target.RowSecurity {
		return "", false
	}
	var b strings.Builder
	b.WriteString("COPY ")
	b.WriteString(e.Target.Quoted)
	b.WriteString(" (")
	n := 0
	for i := range e.Rel.Columns {
		if ti := e.Tcol[i]; ti >= 0 {
			if n > 0 {
				b.WriteString(", ")
			}
			b.WriteString(sqlgen.QuoteIdent(e.Target.Columns[ti].Name))
			n++
		}
	}
	b.WriteString(") FROM STDIN")
	if format == protocol.ColumnBinary {
		b.WriteString(" (FORMAT binary)")
	}
	return b.String(), n > 0
}

// TupleFormat returns the COPY format an insert's tuple can be sent in:
// protocol.ColumnText or protocol.ColumnBinary when all its written values
// are in that format or NULL, else 0. A tuple of NULLs alone fits want
// (0: text).
func TupleFormat(e *relmap.Entry, t *protocol.TupleData, want byte) byte {
	if len(t.Columns) != len(e.Rel.Columns) {
		return 0 // the ordinary path reports it
	}
	for i := range t.Columns {
		if e.Tcol[i] < 0 {
			continue
		}
		var ok bool
		if want, ok = fold(want, t.Columns[i].Kind); !ok {
			return 0
		}
	}
	return orText(want)
}

// RowsFormat returns the COPY format in which net rows can be sent, given
// the source columns written (cols): protocol.ColumnText or ColumnBinary
// when every value is in that format or NULL (an unchanged TOAST value,
// NULL in an insert), else 0.
func RowsFormat(rows []*compact.Row, cols []int) byte {
	var want byte
	for _, r := range rows {
		for _, i := range cols {
			var ok bool
			if want, ok = fold(want, r.Image[i].Kind); !ok {
				return 0
			}
		}
	}
	return orText(want)
}

// fold folds a value of kind k into the COPY format a row or run needs so
// far (want, 0 while only NULLs were seen); ok is false when k is text and
// want binary or the other way round.
func fold(want, k byte) (byte, bool) {
	if k != protocol.ColumnText && k != protocol.ColumnBinary {
		return want, true
	}
	return k, want == 0 || want == k
}

// orText is the format fold arrived at, text when there were only NULLs.
func orText(want byte) byte {
	if want == 0 {
		return protocol.ColumnText
	}
	return want
}

// AppendTuple appends one insert's row of e's written columns in format.
// NULL and an unchanged TOAST value (NULL in an insert, as on the ordinary
// path) are \N in text (-1 in binary); text values are escaped as COPY's
// text format requires; binary values are the type's send format, as
// pgoutput sends them with binary = true.
func AppendTuple(dst []byte, e *relmap.Entry, t *protocol.TupleData, format byte) []byte {
	if format == protocol.ColumnBinary {
		n := 0
		for i := range t.Columns {
			if e.Tcol[i] >= 0 {
				n++
			}
		}
		dst = binary.BigEndian.AppendUint16(dst, uint16(n))
		for i := range t.Columns {
			if e.Tcol[i] < 0 {
				continue
			}
			col := &t.Columns[i]
			if col.Kind != protocol.ColumnBinary {
				dst = binary.BigEndian.AppendUint32(dst, 0xffffffff) // NULL
				continue
			}
			dst = binary.BigEndian.AppendUint32(dst, uint32(len(col.Data)))
			dst = append(dst, col.Data...)
		}
		return dst
	}
	first := true
	for i := range t.Columns {
		if e.Tcol[i] < 0 {
			continue
		}
		if !first {
			dst = append(dst, '\t')
		}
		first = false
		col := &t.Columns[i]
		if col.Kind != protocol.ColumnText {
			dst = append(dst, '\\', 'N')
			continue
		}
		dst = AppendText(dst, col.Data)
	}
	return append(dst, '\n')
}

// AppendRows encodes net rows (of c) for COPY in format, header and
// trailer included: text rows escaped as COPY's text format requires, or
// binary rows of send-format values, NULL for NULL and unchanged TOAST
// values, as AppendTuple does for a decoded tuple.
func AppendRows(c *compact.Compactor, dst []byte, rows []*compact.Row, cols []int, format byte) []byte {
	if format == protocol.ColumnBinary {
		dst = append(dst, BinaryHeader...)
	}
	for _, r := range rows {
		if format == protocol.ColumnBinary {
			dst = binary.BigEndian.AppendUint16(dst, uint16(len(cols)))
		}
		for n, i := range cols {
			x := r.Image[i]
			if format == protocol.ColumnBinary {
				if x.Kind != protocol.ColumnBinary {
					dst = binary.BigEndian.AppendUint32(dst, 0xffffffff)
					continue
				}
				dst = binary.BigEndian.AppendUint32(dst, uint32(x.Len))
				dst = append(dst, c.Bytes(x)...)
				continue
			}
			if n > 0 {
				dst = append(dst, '\t')
			}
			if x.Kind != protocol.ColumnText {
				dst = append(dst, '\\', 'N')
				continue
			}
			dst = AppendText(dst, c.Bytes(x))
		}
		if format != protocol.ColumnBinary {
			dst = append(dst, '\n')
		}
	}
	if format == protocol.ColumnBinary {
		dst = append(dst, BinaryTrailer...)
	}
	return dst
}

// escapes maps the bytes COPY's text format escapes to the letter after
// the backslash: backslash, newline, carriage return and the tab delimiter.
var escapes = [256]byte{'\\': '\\', '\n': 'n', '\r': 'r', '\t': 't'}

// AppendText appends a value escaped for COPY's text format.
func AppendText(dst, v []byte) []byte {
	start := 0
	for i, ch := range v {
		if esc := escapes[ch]; esc != 0 {
			dst = append(dst, v[start:i]...)
			dst = append(dst, '\\', esc)
			start = i + 1
		}
	}
	return append(dst, v[start:]...)
}
