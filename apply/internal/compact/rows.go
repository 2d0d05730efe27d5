package compact

import (
	"encoding/binary"
	"strconv"
	"strings"

	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/protocol"
)

// textArrayOID and textOID are the type OIDs of text[] and text.
const (
	TextArrayOID = 1009
	TextOID      = 25
)

// maxArrayValue is the largest value the array form carries: an array
// parameter is a copy of the values (VALUES parameters point at them where
// they are), and a copy of a value of hundreds of megabytes is memory the
// applier does not need to spend.
const MaxArrayValue = 1 << 20

// BinaryCols marks, for a run of rows, the positions of Row.Key and
// Row.Image whose values are binary.
type BinaryCols struct {
	Key, Image []bool
}

// ArrayRows reports whether a run of rows can use the array form: no value
// larger than maxArrayValue, no position holding both text and binary
// values, and every binary one of a type that has an array type; and which
// positions are binary.
func ArrayRows(e *relmap.Entry, rows []*Row) (bool, BinaryCols) {
	bin := BinaryCols{Key: make([]bool, len(e.Key)), Image: make([]bool, len(e.Tcol))}
	text := BinaryCols{Key: make([]bool, len(e.Key)), Image: make([]bool, len(e.Tcol))}
	for _, r := range rows {
		for part, cells := range [2][]Cell{r.Key, r.Image} {
			b, t := bin.Key, text.Key
			if part == 1 {
				b, t = bin.Image, text.Image
			}
			for i, x := range cells {
				if part == 1 && e.Tcol[i] < 0 {
					continue // not written
				}
				if x.Len > MaxArrayValue {
					return false, bin
				}
				switch x.Kind {
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
	for k, b := range bin.Key {
		if b && e.Column(e.Key[k]).ArrayOID == 0 {
			return false, bin
		}
	}
	for i, b := range bin.Image {
		if b && e.Tcol[i] >= 0 && e.Column(i).ArrayOID == 0 {
			return false, bin
		}
	}
	return true, bin
}

// WriteRowSource writes the row source of n rows whose columns have the
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
func WriteRowSource(b *strings.Builder, arrays bool, n int, types []string, arrs []uint32) {
	if !arrays {
		b.WriteString("VALUES ")
		ValuesList(b, n, len(types), 1)
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
		sqlgen.WriteParam(b, i+1)
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

// RowParamOIDs are the parameter types of a row source: one row's oids
// repeated n times, or with arrays one array per column: its type from
// arrs where binary, else text[].
func RowParamOIDs(arrays bool, n int, oids, arrs []uint32) []uint32 {
	if arrays {
		all := make([]uint32, len(oids))
		for i := range all {
			all[i] = TextArrayOID
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

// AppendArrayHeader appends the header of a one-dimensional array of n
// elements of type elem in binary format: dimensions, the has-nulls flag,
// the element type, then the length and lower bound (1) of the dimension.
// An empty array has no dimension.
func AppendArrayHeader(dst []byte, elem uint32, n int, nulls uint32) []byte {
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

// AppendArrayElem appends one element of a binary array: its length, -1
// for NULL (nil), then its bytes.
func AppendArrayElem(dst, v []byte) []byte {
	if v == nil {
		return binary.BigEndian.AppendUint32(dst, 0xFFFFFFFF)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(v)))
	return append(dst, v...)
}

// whole calls fn once with all rows: the array form needs no chunks.
func Whole(rows []*Row, _ int, fn func([]*Row) error) error {
	if len(rows) == 0 {
		return nil
	}
	return fn(rows)
}

// RowForm picks the row source of a run: arrays when its values allow
// (with the positions holding binary values), and how to cut the run into
// statements.
func RowForm(e *relmap.Entry, rows []*Row) (arrays bool, bin BinaryCols, each func([]*Row, int, func([]*Row) error) error) {
	if ok, bin := ArrayRows(e, rows); ok {
		return true, bin, Whole
	}
	return false, BinaryCols{}, Chunks
}

// ShapeName names a multi-row statement's shape for the relation's
// statement cache: the kind of change (and column mask), the row count for
// the VALUES form, and for the array form which columns are binary.
func ShapeName(kind string, arrays bool, n int, arrs []uint32) string {
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

// chunkSizes are the row counts of multi-row statements; a run is written
// in the largest Chunks first, so that each table needs few statements.
var chunkSizes = []int{256, 32, 4, 1}

// Chunks calls fn for consecutive Chunks of rows, each of a size from
// chunkSizes that also keeps the parameter count under PostgreSQL's limit.
func Chunks(rows []*Row, perRow int, fn func([]*Row) error) error {
	for len(rows) > 0 {
		n := 1
		for _, s := range chunkSizes {
			if s <= len(rows) && s*perRow <= 65535 {
				n = s
				break
			}
		}
		if err := fn(rows[:n]); err != nil {
			return err
		}
		rows = rows[n:]
	}
	return nil
}

// ValuesList writes n rows of cols placeholders: ($1, $2), ($3, $4), ...
func ValuesList(b *strings.Builder, n, cols, first int) {
	p := first
	for r := 0; r < n; r++ {
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for c := 0; c < cols; c++ {
			if c > 0 {
				b.WriteString(", ")
			}
			sqlgen.WriteParam(b, p)
			p++
		}
		b.WriteByte(')')
	}
}

// PackArrays turns params, queued row by row (rows of width values, nil
// for NULL), into width array parameters, one per column, in the binary
// array format (array_recv): a header, then each element as its length
// and bytes. It appends the arrays to buf and their ends to ends and
// returns both. The target copies the bytes as they are, where the text
// form of an array would have to be scanned for quotes and escapes
// (array_in was a quarter of the target's time on a pgbench backlog), and
// nothing needs escaping here either. elems gives each column's element
// type when its values are binary (0 or missing: text).
func PackArrays(buf []byte, ends []int, params [][]byte, width int, elems []uint32) ([]byte, []int) {
	rows := len(params) / width
	for c := 0; c < width; c++ {
		nulls := uint32(0)
		for r := 0; r < rows; r++ {
			if params[r*width+c] == nil {
				nulls = 1
				break
			}
		}
		elem := uint32(TextOID)
		if c < len(elems) && elems[c] != 0 {
			elem = elems[c]
		}
		buf = AppendArrayHeader(buf, elem, rows, nulls)
		for r := 0; r < rows; r++ {
			buf = AppendArrayElem(buf, params[r*width+c])
		}
		ends = append(ends, len(buf))
	}
	return buf, ends
}
