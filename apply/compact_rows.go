package apply

import (
	"encoding/binary"
	"strconv"
	"strings"

	"github.com/walapply/walapply/protocol"
)

// textArrayOID and textOID are the type OIDs of text[] and text.
const (
	textArrayOID = 1009
	textOID      = 25
)

// maxArrayValue is the largest value the array form carries: an array
// parameter is a copy of the values (VALUES parameters point at them where
// they are), and a copy of a value of hundreds of megabytes is memory the
// applier does not need to spend.
const maxArrayValue = 1 << 20

// binaryCols marks, for a run of rows, the positions of netRow.key and
// netRow.image whose values are binary.
type binaryCols struct {
	key, image []bool
}

// arrayRows reports whether a run of rows can use the array form: no value
// larger than maxArrayValue, no position holding both text and binary
// values, and every binary one of a type that has an array type; and which
// positions are binary.
func arrayRows(e *relEntry, rows []*netRow) (bool, binaryCols) {
	bin := binaryCols{key: make([]bool, len(e.Key)), image: make([]bool, len(e.Tcol))}
	text := binaryCols{key: make([]bool, len(e.Key)), image: make([]bool, len(e.Tcol))}
	for _, r := range rows {
		for part, cells := range [2][]cell{r.key, r.image} {
			b, t := bin.key, text.key
			if part == 1 {
				b, t = bin.image, text.image
			}
			for i, x := range cells {
				if part == 1 && e.Tcol[i] < 0 {
					continue // not written
				}
				if x.len > maxArrayValue {
					return false, bin
				}
				switch x.kind {
				case protocol.ColumnBinary:
					b[i] = true
				case protocol.ColumnText:
					t[i] = true
				}
				if b[i] && t[i] {
					return false, bin
				}
			}
		}
	}
	for k, b := range bin.key {
		if b && e.Column(e.Key[k]).ArrayOID == 0 {
			return false, bin
		}
	}
	for i, b := range bin.image {
		if b && e.Tcol[i] >= 0 && e.Column(i).ArrayOID == 0 {
			return false, bin
		}
	}
	return true, bin
}

// writeRowSource writes the row source of n rows whose columns have the
// given SQL types: VALUES, or with arrays the unnest form, its parameters
// numbered from $1. arrs, in the array form, gives each column's array type
// when its values are binary (0: text[] cast to the type).
//
// Row sources of multi-row statements.
//
// A multi-row INSERT, UPDATE or DELETE (compact.go) reads its rows from a
// row source named _v whose columns are column1, column2, ... It takes one
// of two forms:
//
//	VALUES ($1, $2), ($3, $4), ...
//	SELECT _a.c1::T1 AS column1, _a.c2::T2 AS column2
//	  FROM ROWS FROM (unnest($1::text[]), unnest($2::text[])) AS _a(c1, c2)
//
// The VALUES form has one parameter per value, so a run of rows is cut
// into chunks (chunkSizes) and each chunk size is a statement of its own.
// The array form has one array parameter per column, whatever the number
// of rows: every run of one table and kind of change is one statement, and
// one prepared statement. A group of 2,000 small transactions over 50
// tables then costs about 150 statements on the target instead of about
// 950, and the per-statement cost (bind, plan, executor start-up) was most
// of the target's time on such a workload. Values travel as text inside
// the arrays and are cast to the columns' types, schema-qualified and
// without their modifiers (a cast to varchar(3) would truncate where the
// assignment to the column raises an error, as PostgreSQL's subscriber
// does); the cast is the type's input function, as for a typed parameter.
// Binary values (--binary) travel in an array of the column's own type
// instead, unnest($n) with no cast: the target runs the type's receive
// function on each element, as for a binary parameter. A run in which one
// column mixes text and binary values, a binary column whose type has no
// array type, or a value over maxArrayValue uses VALUES.
func writeRowSource(b *strings.Builder, arrays bool, n int, types []string, arrs []uint32) {
	if !arrays {
		b.WriteString("VALUES ")
		valuesList(b, n, len(types), 1)
		return
	}
	typed := func(i int) bool { return i < len(arrs) && arrs[i] != 0 }
	b.WriteString("SELECT ")
	for i, t := range types {
		if i > 0 {
			b.WriteString(", ")
		}
		c := strconv.Itoa(i + 1)
		if typed(i) {
			b.WriteString("_a.c" + c + " AS column" + c)
		} else {
			b.WriteString("_a.c" + c + "::" + t + " AS column" + c)
		}
	}
	b.WriteString(" FROM ROWS FROM (")
	for i := range types {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("pg_catalog.unnest(")
		writeParam(b, i+1)
		if !typed(i) {
			b.WriteString("::pg_catalog.text[]")
		}
		b.WriteString(")")
	}
	b.WriteString(") AS _a(")
	for i := range types {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("c" + strconv.Itoa(i+1))
	}
	b.WriteByte(')')
}

// rowParamOIDs are the parameter types of a row source: one row's oids
// repeated n times, or with arrays one array per column: its type from
// arrs where binary, else text[].
func rowParamOIDs(arrays bool, n int, oids, arrs []uint32) []uint32 {
	if arrays {
		all := make([]uint32, len(oids))
		for i := range all {
			all[i] = textArrayOID
			if i < len(arrs) && arrs[i] != 0 {
				all[i] = arrs[i]
			}
		}
		return all
	}
	all := make([]uint32, 0, n*len(oids))
	for i := 0; i < n; i++ {
		all = append(all, oids...)
	}
	return all
}

// packArrays turns the parameters queued row by row (rows of width
// values, nil for NULL) into width array parameters, one per column, in
// the binary array format (array_recv): a header, then each element as its
// length and bytes. The target copies the bytes as they are, where the text
// form of an array would have to be scanned for quotes and escapes
// (array_in was a quarter of the target's time on a pgbench backlog), and
// nothing needs escaping here either. elems gives each column's element
// type when its values are binary (0 or missing: text).
func (a *applier) packArrays(width int, elems []uint32) {
	rows := len(a.params) / width
	buf := a.arrayBuf[:0]
	ends := a.arrayEnds[:0]
	for c := 0; c < width; c++ {
		nulls := uint32(0)
		for r := 0; r < rows; r++ {
			if a.params[r*width+c] == nil {
				nulls = 1
				break
			}
		}
		elem := uint32(textOID)
		if c < len(elems) && elems[c] != 0 {
			elem = elems[c]
		}
		buf = appendArrayHeader(buf, elem, rows, nulls)
		for r := 0; r < rows; r++ {
			buf = appendArrayElem(buf, a.params[r*width+c])
		}
		ends = append(ends, len(buf))
	}
	a.arrayBuf, a.arrayEnds = buf, ends
	a.params, a.formats = a.params[:0], a.formats[:0]
	start := 0
	for _, end := range ends {
		a.params = append(a.params, buf[start:end])
		a.formats = append(a.formats, 1)
		start = end
	}
}

// appendArrayHeader appends the header of a one-dimensional array of n
// elements of type elem in binary format: dimensions, the has-nulls flag,
// the element type, then the length and lower bound (1) of the dimension.
// An empty array has no dimension.
func appendArrayHeader(dst []byte, elem uint32, n int, nulls uint32) []byte {
	if n == 0 {
		dst = binary.BigEndian.AppendUint32(dst, 0)
		dst = binary.BigEndian.AppendUint32(dst, 0)
		return binary.BigEndian.AppendUint32(dst, elem)
	}
	dst = binary.BigEndian.AppendUint32(dst, 1)
	dst = binary.BigEndian.AppendUint32(dst, nulls)
	dst = binary.BigEndian.AppendUint32(dst, elem)
	dst = binary.BigEndian.AppendUint32(dst, uint32(n))
	return binary.BigEndian.AppendUint32(dst, 1)
}

// appendArrayElem appends one element of a binary array: its length, -1
// for NULL (nil), then its bytes.
func appendArrayElem(dst, v []byte) []byte {
	if v == nil {
		return binary.BigEndian.AppendUint32(dst, 0xFFFFFFFF)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(v)))
	return append(dst, v...)
}

// whole calls fn once with all rows: the array form needs no chunks.
func whole(rows []*netRow, _ int, fn func([]*netRow) error) error {
	if len(rows) == 0 {
		return nil
	}
	return fn(rows)
}

// rowForm picks the row source of a run: arrays when its values allow
// (with the positions holding binary values), and how to cut the run into
// statements.
func rowForm(e *relEntry, rows []*netRow) (arrays bool, bin binaryCols, each func([]*netRow, int, func([]*netRow) error) error) {
	if ok, bin := arrayRows(e, rows); ok {
		return true, bin, whole
	}
	return false, binaryCols{}, chunks
}

// shapeName names a multi-row statement's shape for the relation's
// statement cache: the kind of change (and column mask), the row count for
// the VALUES form, and for the array form which columns are binary.
func shapeName(kind string, arrays bool, n int, arrs []uint32) string {
	if arrays {
		name := []byte("a" + kind + "-")
		for _, t := range arrs {
			if t != 0 {
				name = append(name, 'b')
			} else {
				name = append(name, 't')
			}
		}
		return string(name)
	}
	return "m" + kind + "-" + strconv.Itoa(n)
}
