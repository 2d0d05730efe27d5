package engine

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/walapply/walapply/apply/internal/copydata"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/protocol"
)

// How the fake target (engine_fake_test.go) renders what it is sent, and
// its catalog.

// fakeParams shows parameters as ('text', NULL, \x0102, {'a','b'}): a
// binary value that reads as a one-dimensional text[] is shown as one.
func fakeParams(params [][]byte, formats []int16) string {
	var b strings.Builder
	b.WriteByte('(')
	for i, p := range params {
		if i > 0 {
			b.WriteString(", ")
		}
		bin := len(formats) == 1 && formats[0] == 1 || i < len(formats) && formats[i] == 1
		switch {
		case p == nil:
			b.WriteString("NULL")
		case !bin:
			b.WriteString(strconv.Quote(string(p)))
		default:
			if s, ok := fakeTextArray(p); ok {
				b.WriteString(s)
			} else {
				b.WriteString(`\x` + hex.EncodeToString(p))
			}
		}
	}
	b.WriteByte(')')
	return b.String()
}

// fakeTextArray decodes the binary form of a one-dimensional text[].
func fakeTextArray(p []byte) (string, bool) {
	if len(p) < 12 {
		return "", false
	}
	ndim, elem := binary.BigEndian.Uint32(p), binary.BigEndian.Uint32(p[8:])
	if elem != 25 || ndim > 1 {
		return "", false
	}
	p = p[12:]
	n := 0
	if ndim == 1 {
		if len(p) < 8 {
			return "", false
		}
		n, p = int(binary.BigEndian.Uint32(p)), p[8:]
	}
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i < n; i++ {
		if len(p) < 4 {
			return "", false
		}
		l := int32(binary.BigEndian.Uint32(p))
		p = p[4:]
		if i > 0 {
			b.WriteByte(',')
		}
		if l < 0 {
			b.WriteString("NULL")
			continue
		}
		if int(l) > len(p) {
			return "", false
		}
		b.WriteString(strconv.Quote(string(p[:l])))
		p = p[l:]
	}
	if len(p) != 0 {
		return "", false
	}
	b.WriteByte('}')
	return b.String(), true
}

// fakeCopyData shows COPY data: text as its lines, binary in hex.
func fakeCopyData(data []byte) string {
	if len(data) >= len(copydata.BinaryHeader) && string(data[:len(copydata.BinaryHeader)]) == string(copydata.BinaryHeader) {
		return `\x` + hex.EncodeToString(data)
	}
	return strings.TrimSuffix(string(data), "\n")
}

// fakeCatalog is a relmap.Catalog of tables declared by the test: each has
// the columns of its source relation, of the types named in fakeTypeNames, and
// one unique index, on the relation's key columns (none without a key).
type fakeCatalog struct {
	tables map[string]*relmap.Table
}

func newFakeCatalog() *fakeCatalog { return &fakeCatalog{tables: map[string]*relmap.Table{}} }

// fakeTypeNames are the types the transcripts use.
var fakeTypeNames = map[uint32]string{16: "boolean", 20: "bigint", 23: "integer", 25: "text", 114: "json", 1043: "character varying", 17: "bytea"}

// fakeArrayTypes are their array types.
var fakeArrayTypes = map[uint32]uint32{16: 1000, 20: 1016, 23: 1007, 25: 1009, 114: 199, 1043: 1015, 17: 1001}

// addRelation declares rel's target table.
func (c *fakeCatalog) addRelation(rel *protocol.Relation) *relmap.Table {
	schema := relmap.SourceSchema(rel.Namespace)
	t := &relmap.Table{OID: rel.RelationID, Schema: schema, Name: rel.Name, Quoted: sqlgen.QuoteQualified(schema, rel.Name),
		ByName: map[string]int{}, UniqueCols: map[string]bool{}}
	for _, col := range rel.Columns {
		name := fakeTypeNames[col.TypeOID]
		t.ByName[col.Name] = len(t.Columns)
		t.Columns = append(t.Columns, relmap.Column{Name: col.Name, TypeOID: col.TypeOID, TypeName: name, CastType: name,
			ArrayOID: fakeArrayTypes[col.TypeOID], HasEq: col.TypeOID != 114})
		if col.IsKey() && rel.ReplicaIdentity != protocol.ReplicaIdentityFull {
			t.UniqueCols[col.Name] = true
		}
	}
	t.KeyOnlyUnique = len(t.UniqueCols) > 0
	c.tables[schema+"."+rel.Name] = t
	return t
}

func (c *fakeCatalog) LookupTable(ctx context.Context, schema, name string) (*relmap.Table, bool, error) {
	t, ok := c.tables[schema+"."+name]
	return t, ok, nil
}
