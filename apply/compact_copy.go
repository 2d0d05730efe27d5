package apply

import (
	"encoding/binary"

	"github.com/walapply/walapply/apply/internal/compact"
	"github.com/walapply/walapply/protocol"
)

// copyFormatOf returns the COPY format in which rows can be sent, given the
// source columns written (cols): protocol.ColumnText or ColumnBinary when
// every value is in that format or NULL (an unchanged TOAST value, NULL in
// an insert), else 0.
func copyFormatOf(rows []*compact.Row, cols []int) byte {
	var want byte
	for _, r := range rows {
		for _, i := range cols {
			var ok bool
			if want, ok = foldCopyFormat(want, r.Image[i].Kind); !ok {
				return 0
			}
		}
	}
	return copyFormatOr(want)
}

// copyData encodes rows for COPY in format: text rows escaped as COPY's
// text format requires (copyRun.encode), or binary rows of send-format
// values (copyRun.encodeBinary), NULL for NULL and unchanged TOAST values.
func copyData(c *compact.Compactor, dst []byte, rows []*compact.Row, cols []int, format byte) []byte {
	if format == protocol.ColumnBinary {
		dst = append(dst, copyBinaryHeader...)
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
			dst = appendCopyText(dst, c.Bytes(x))
		}
		if format != protocol.ColumnBinary {
			dst = append(dst, '\n')
		}
	}
	if format == protocol.ColumnBinary {
		dst = append(dst, 0xff, 0xff)
	}
	return dst
}
