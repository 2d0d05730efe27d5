// Package relmap maps the source's relations onto the target's tables:
// tables are found by schema and name, columns by name, as PostgreSQL's
// subscriber finds them. Extra target columns keep their defaults,
// generated target columns are not written, and with binary transfer a
// built-in type must be the same on both sides. The target's catalog is
// read once per relation (catalog.go), through a Catalog the caller
// chooses (the applier reads it on its control connection, so that the
// applying session keeps its batch in flight).
package relmap

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/protocol"
)

// firstNonBuiltinOID: type OIDs below it are the same on every cluster
// (FirstGenbkiObjectId in PostgreSQL's sources).
const firstNonBuiltinOID = 10000

// Catalog is where a relation's target table is found.
type Catalog interface {
	LookupTable(ctx context.Context, schema, name string) (*Table, bool, error)
}

// Entry is one source relation and how it maps onto the target.
type Entry struct {
	Rel *protocol.Relation // as last described by the source

	Mapped bool
	Target *Table
	// Tcol[i] is the target column of source column i, or -1 when the
	// target column is generated and so never written.
	Tcol []int
	// Key lists the source columns of the replica identity.
	Key []int

	// Stmts caches prepared statements by shape (see the applier's
	// statement).
	Stmts map[string]*pgconn.StatementDescription
	// Params names, for the SQL of each row statement in Stmts, the source
	// column of each parameter ($1 first; parameters after them, such as
	// a conflict wrapper's, are not columns): an error about a parameter
	// then names its column (withColumn).
	Params map[string][]string

	// Compact caches compactable's answer for this entry (0: not asked
	// yet, 1: yes, 2: no); the policies do not change within a session.
	Compact uint8

	// name is String's answer, rendered once: conflict records name the
	// relation per change (appendRecordParams).
	name string
}

// NoteParams records the columns of a statement's parameters.
func (e *Entry) NoteParams(sql string, columns []string) {
	if e.Params == nil {
		e.Params = map[string][]string{}
	}
	e.Params[sql] = columns
}

// String names the relation for messages: schema.name as the source has it.
func (e *Entry) String() string {
	if e.name == "" {
		e.name = sqlgen.QuoteQualified(SourceSchema(e.Rel.Namespace), e.Rel.Name)
	}
	return e.name
}

// LogName names the relation in log fields (sqlgen.LogRelation).
func (e *Entry) LogName() string {
	return sqlgen.LogRelation(SourceSchema(e.Rel.Namespace), e.Rel.Name)
}

// SourceSchema is the schema of a relation the source names with ns
// (pg_catalog when ns is empty).
func SourceSchema(ns string) string {
	if ns == "" {
		return "pg_catalog"
	}
	return ns
}

// Column returns the target column that source column i maps to.
func (e *Entry) Column(i int) *Column { return &e.Target.Columns[e.Tcol[i]] }

// ArrayTypes appends, for the row-source columns made of source columns
// idx, the array type of each whose values are binary (binary(n) for the
// n-th of them), 0 for text.
func (e *Entry) ArrayTypes(dst []uint32, idx []int, binary func(n int) bool) []uint32 {
	for n, i := range idx {
		t := uint32(0)
		if binary(n) {
			t = e.Column(i).ArrayOID
		}
		dst = append(dst, t)
	}
	return dst
}

// ElemTypes appends the element types of typed arrays for packArrays: the
// column type of source column idx[n] where arrs[n] is an array type, 0
// for text.
func (e *Entry) ElemTypes(dst []uint32, idx []int, arrs []uint32) []uint32 {
	for n, i := range idx {
		t := uint32(0)
		if n < len(arrs) && arrs[n] != 0 {
			t = e.Column(i).TypeOID
		}
		dst = append(dst, t)
	}
	return dst
}

// TypeOIDs appends the type OIDs of the target columns that the source
// columns idx map to.
func (e *Entry) TypeOIDs(idx []int, dst []uint32) []uint32 {
	for _, i := range idx {
		dst = append(dst, e.Target.Columns[e.Tcol[i]].TypeOID)
	}
	return dst
}

// TypeNames appends the SQL types of the target columns that the source
// columns idx map to.
func (e *Entry) TypeNames(idx []int, dst []string) []string {
	for _, i := range idx {
		dst = append(dst, e.Target.Columns[e.Tcol[i]].CastType)
	}
	return dst
}

// Cache keeps the source's Relation and Type messages, and for each
// relation the target table it maps onto, its column mapping and its
// prepared statements. A Relation message for a known OID replaces the entry:
// the source resends it whenever the definition may have changed, so a
// column added or dropped mid-stream takes effect at the next change.
type Cache struct {
	Rels   map[uint32]*Entry
	Types  map[uint32]*protocol.TypeMessage
	Binary bool
}

// NewCache returns an empty cache; binary says the stream carries
// binary-format values, which need the target types to match exactly.
func NewCache(binary bool) *Cache {
	return &Cache{Rels: map[uint32]*Entry{}, Types: map[uint32]*protocol.TypeMessage{}, Binary: binary}
}

// PutRelation remembers a Relation message. rel must not be reused by the
// caller (protocol.Relation.Decode allocates a fresh value).
func (c *Cache) PutRelation(rel *protocol.Relation) {
	c.Rels[rel.RelationID] = &Entry{Rel: rel}
}

// PutType remembers a Type message.
func (c *Cache) PutType(t *protocol.TypeMessage) {
	cp := *t
	c.Types[t.TypeOID] = &cp
}

// Mismatch says the target table does not fit the source relation; the
// applier reports it as a SchemaError naming the relation.
type Mismatch struct {
	Column  string // empty when the whole table is concerned
	Problem string
	Hint    string
}

func (m *Mismatch) Error() string { return m.Problem + "; " + m.Hint }

// Map finds the target table of a source relation: by schema and name,
// columns by name (PostgreSQL's subscriber does the same). A table that
// does not fit is a *Mismatch.
func (c *Cache) Map(ctx context.Context, cat Catalog, e *Entry) error {
	schema := SourceSchema(e.Rel.Namespace)
	t, found, err := cat.LookupTable(ctx, schema, e.Rel.Name)
	if err != nil {
		return err
	}
	if !found {
		return &Mismatch{Problem: "the target table does not exist",
			Hint: "create it on the target with the source's columns (the schema is yours to manage, as with PostgreSQL's subscriber), then restart"}
	}
	e.Target = t
	e.Tcol = make([]int, len(e.Rel.Columns))
	e.Key = e.Key[:0]
	var missing []string
	for i, sc := range e.Rel.Columns {
		ti, ok := t.Column(sc.Name)
		if !ok {
			missing = append(missing, sqlgen.QuoteIdent(sc.Name))
			continue
		}
		tc := t.Columns[ti]
		if tc.Generated {
			if sc.IsKey() {
				return &Mismatch{Column: sc.Name,
					Problem: "the replica identity column is a generated column on the target",
					Hint:    "make the target column an ordinary column"}
			}
			e.Tcol[i] = -1
		} else {
			e.Tcol[i] = ti
		}
		if c.Binary && sc.TypeOID < firstNonBuiltinOID && tc.TypeOID != sc.TypeOID {
			return &Mismatch{Column: sc.Name,
				Problem: fmt.Sprintf("binary transfer needs the same type on both sides, but the target column is %s (source type OID %d)", tc.TypeName, sc.TypeOID),
				Hint:    "change the target column's type to the source's, or run without --binary"}
		}
		if sc.IsKey() {
			e.Key = append(e.Key, i)
		}
	}
	if len(missing) > 0 {
		return &Mismatch{Column: fmt.Sprint(missing),
			Problem: fmt.Sprintf("the target table is missing replicated column(s) %v", missing),
			Hint:    "add the column(s) to the target table, then restart"}
	}
	e.Stmts = map[string]*pgconn.StatementDescription{}
	e.Mapped = true
	return nil
}
