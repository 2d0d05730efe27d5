package relmap

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/apply/internal/sqlgen"
)

// Column is a column of a target table as the target's catalog has it.
type Column struct {
	Name     string
	TypeOID  uint32
	TypeName string // format_type, for messages
	// CastType names the column's type without its modifier, for casts
	// (internal/compact/rows.go): a cast to varchar(3) or char(4) would truncate
	// silently where assigning to the column raises an error.
	CastType string
	// ArrayOID is the column type's array type, for binary values sent as
	// one typed array per column (internal/compact/rows.go); 0 when it has none or
	// is composite (or a domain over one), whose unnest() would expand.
	ArrayOID  uint32
	Generated bool // GENERATED ALWAYS: never written
	HasEq     bool // the type has an equality operator (see typesWithEquality)
	// EqSchema is the schema of that operator when it lies outside
	// pg_catalog (citext, hstore, ...): the session's search_path is
	// pg_catalog, so it must be named.
	EqSchema string
}

// Table is a target table as the target's catalog has it.
type Table struct {
	OID       uint32
	Schema    string
	Name      string
	Quoted    string // schema-qualified, quoted
	Partition bool   // relkind 'p': a partitioned table
	// RowSecurity: row-level security is enabled on the table. COPY FROM
	// refuses such a table for a role subject to it, where INSERT applies
	// the policies, so its inserts never go by COPY.
	RowSecurity bool
	Columns     []Column
	ByName      map[string]int
	// KeyOnlyUnique: the table has exactly one unique index (or
	// constraint) and no exclusion constraint; UniqueCols are its columns.
	// Net-effect compaction (internal/compact) needs that.
	KeyOnlyUnique bool
	UniqueCols    map[string]bool
}

// Column returns the index in Columns of the column named name.
func (t *Table) Column(name string) (int, bool) {
	i, ok := t.ByName[name]
	return i, ok
}

// Querier is the part of *pgx.Conn the catalog lookups need.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

const targetTableSQL = `
SELECT c.oid, c.relkind, c.relrowsecurity, a.attname, a.atttypid, a.attgenerated <> '',
       pg_catalog.format_type(a.atttypid, a.atttypmod),
       pg_catalog.quote_ident(tn.nspname) || '.' || pg_catalog.quote_ident(ty.typname),
       -- no typed array for composites and domains over them: unnest() in
       -- ROWS FROM would expand their fields into columns
       CASE WHEN ty.typtype = 'c' OR (ty.typtype = 'd' AND EXISTS (
                WITH RECURSIVE b(oid) AS (
                    SELECT ty.typbasetype
                  UNION ALL
                    SELECT bt.typbasetype FROM pg_catalog.pg_type bt JOIN b ON bt.oid = b.oid WHERE bt.typtype = 'd')
                SELECT 1 FROM b JOIN pg_catalog.pg_type bt ON bt.oid = b.oid WHERE bt.typtype = 'c'))
            THEN 0 ELSE ty.typarray END
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_catalog.pg_attribute a
       ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
LEFT JOIN pg_catalog.pg_type ty ON ty.oid = a.atttypid
LEFT JOIN pg_catalog.pg_namespace tn ON tn.oid = ty.typnamespace
WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')
ORDER BY a.attnum`

// LookupTable reads a table's columns from the target's catalog. It
// returns found=false when no such table exists.
func LookupTable(ctx context.Context, q Querier, schema, name string) (*Table, bool, error) {
	rows, err := q.Query(ctx, targetTableSQL, schema, name)
	if err != nil {
		return nil, false, fmt.Errorf("reading the target catalog for table %s: %w", sqlgen.QuoteQualified(schema, name), err)
	}
	defer rows.Close()
	t := &Table{Schema: schema, Name: name, Quoted: sqlgen.QuoteQualified(schema, name), ByName: map[string]int{}}
	found := false
	for rows.Next() {
		var (
			relkind   byte
			attname   *string
			atttypid  *uint32
			generated *bool
			typeName  *string
			castType  *string
			arrayOID  *uint32
		)
		if err := rows.Scan(&t.OID, &relkind, &t.RowSecurity, &attname, &atttypid, &generated, &typeName, &castType, &arrayOID); err != nil {
			return nil, false, fmt.Errorf("reading the target catalog for table %s: %w", t.Quoted, err)
		}
		found = true
		t.Partition = relkind == 'p'
		if attname == nil {
			continue // a table without columns
		}
		t.ByName[*attname] = len(t.Columns)
		t.Columns = append(t.Columns, Column{Name: *attname, TypeOID: *atttypid, TypeName: *typeName, CastType: *castType, ArrayOID: *arrayOID, Generated: *generated})
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("reading the target catalog for table %s: %w", t.Quoted, err)
	}
	if !found {
		return nil, false, nil
	}
	if err := lookupUniqueIndexes(ctx, q, t); err != nil {
		return nil, false, err
	}
	oids := make([]uint32, 0, len(t.Columns))
	for _, c := range t.Columns {
		oids = append(oids, c.TypeOID)
	}
	eq, err := typesWithEquality(ctx, q, oids)
	if err != nil {
		return nil, false, fmt.Errorf("reading the target's operators for table %s: %w", t.Quoted, err)
	}
	for i := range t.Columns {
		e := eq[t.Columns[i].TypeOID]
		t.Columns[i].HasEq, t.Columns[i].EqSchema = e.has, e.schema
	}
	return t, true, nil
}

// typeNodeSQL walks every type the given ones are built from (domain base
// types, array elements, range subtypes, multirange ranges, composite
// attributes) and returns what decides whether each has an equality
// operator: a default btree or hash operator class of its own.
const typeNodeSQL = `
WITH RECURSIVE t(oid) AS (
    SELECT unnest($1::oid[])
  UNION
    SELECT x.child
    FROM t JOIN pg_catalog.pg_type ty ON ty.oid = t.oid
    CROSS JOIN LATERAL (
        SELECT ty.typbasetype WHERE ty.typtype = 'd'
      UNION ALL
        SELECT ty.typelem WHERE ty.typcategory = 'A' AND ty.typelem <> 0
      UNION ALL
        SELECT r.rngsubtype FROM pg_catalog.pg_range r WHERE r.rngtypid = ty.oid
      UNION ALL
        SELECT r.rngtypid FROM pg_catalog.pg_range r WHERE r.rngmultitypid = ty.oid
      UNION ALL
        SELECT a.atttypid FROM pg_catalog.pg_attribute a
        WHERE ty.typtype = 'c' AND a.attrelid = ty.typrelid AND a.attnum > 0 AND NOT a.attisdropped
    ) x(child)
)
SELECT ty.oid, ty.typtype, ty.typcategory, ty.typbasetype, ty.typelem,
       COALESCE((SELECT r.rngsubtype FROM pg_catalog.pg_range r WHERE r.rngtypid = ty.oid), 0),
       COALESCE((SELECT r.rngtypid FROM pg_catalog.pg_range r WHERE r.rngmultitypid = ty.oid), 0),
       EXISTS (SELECT 1 FROM pg_catalog.pg_opclass oc JOIN pg_catalog.pg_am am ON am.oid = oc.opcmethod
               WHERE oc.opcdefault AND am.amname IN ('btree', 'hash') AND oc.opcintype = ty.oid),
       ARRAY(SELECT a.atttypid FROM pg_catalog.pg_attribute a
             WHERE ty.typtype = 'c' AND a.attrelid = ty.typrelid AND a.attnum > 0 AND NOT a.attisdropped)::oid[],
       COALESCE((SELECT n.nspname
                 FROM pg_catalog.pg_opclass oc
                 JOIN pg_catalog.pg_am am ON am.oid = oc.opcmethod
                 JOIN pg_catalog.pg_amop ao ON ao.amopfamily = oc.opcfamily
                      AND ao.amoplefttype = ty.oid AND ao.amoprighttype = ty.oid
                      AND ao.amopstrategy = CASE am.amname WHEN 'btree' THEN 3 ELSE 1 END
                 JOIN pg_catalog.pg_operator o ON o.oid = ao.amopopr
                 JOIN pg_catalog.pg_namespace n ON n.oid = o.oprnamespace
                 WHERE oc.opcdefault AND am.amname IN ('btree', 'hash') AND oc.opcintype = ty.oid
                 ORDER BY am.amname = 'btree' DESC LIMIT 1), 'pg_catalog')
FROM t JOIN pg_catalog.pg_type ty ON ty.oid = t.oid`

// typeNode is one row of typeNodeSQL.
type typeNode struct {
	typtype, category byte
	base, elem        uint32
	rangeSub, mrRange uint32
	ownOpclass        bool
	attrs             []uint32
	opSchema          string // schema of the type's own equality operator
}

// equality is what typesWithEquality finds for a type.
type equality struct {
	has    bool
	schema string // the operator's schema when not pg_catalog
}

// typesWithEquality tells, for each type, whether "=" works on it the way
// PostgreSQL's type cache would find it. REPLICA IDENTITY FULL compares
// every column; the types that lack equality (json, point, xml, arrays of
// them, ...) are compared through their text form instead.
func typesWithEquality(ctx context.Context, q Querier, oids []uint32) (map[uint32]equality, error) {
	rows, err := q.Query(ctx, typeNodeSQL, oids)
	if err != nil {
		return nil, err
	}
	nodes := map[uint32]*typeNode{}
	for rows.Next() {
		var oid uint32
		n := &typeNode{}
		if err := rows.Scan(&oid, &n.typtype, &n.category, &n.base, &n.elem, &n.rangeSub, &n.mrRange, &n.ownOpclass, &n.attrs, &n.opSchema); err != nil {
			rows.Close()
			return nil, err
		}
		nodes[oid] = n
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return resolveEquality(nodes, oids), nil
}

// resolveEquality is the pure part of typesWithEquality.
func resolveEquality(nodes map[uint32]*typeNode, oids []uint32) map[uint32]equality {
	memo := map[uint32]bool{}
	visiting := map[uint32]bool{}
	var has func(oid uint32) bool
	has = func(oid uint32) bool {
		if v, ok := memo[oid]; ok {
			return v
		}
		n := nodes[oid]
		if n == nil || visiting[oid] {
			return false
		}
		visiting[oid] = true
		var v bool
		switch {
		case n.typtype == 'e':
			v = true // enums compare through anyenum's operators
		case n.typtype == 'd':
			v = has(n.base)
		case n.ownOpclass:
			v = true
		case n.category == 'A' && n.elem != 0:
			v = has(n.elem)
		case n.typtype == 'r':
			v = has(n.rangeSub)
		case n.typtype == 'm':
			v = has(n.mrRange)
		case n.typtype == 'c':
			v = true
			for _, a := range n.attrs {
				if !has(a) {
					v = false
					break
				}
			}
		}
		visiting[oid] = false
		memo[oid] = v
		return v
	}
	// The operator "=" resolves to: a domain's base type's, a type's own
	// (which may live in an extension's schema), or a polymorphic one in
	// pg_catalog (enums, arrays, ranges, records).
	var schema func(oid uint32, depth int) string
	schema = func(oid uint32, depth int) string {
		n := nodes[oid]
		switch {
		case n == nil || depth > 32:
			return ""
		case n.typtype == 'd':
			return schema(n.base, depth+1)
		case n.typtype != 'e' && n.ownOpclass && n.opSchema != "pg_catalog":
			return n.opSchema
		}
		return ""
	}
	out := make(map[uint32]equality, len(oids))
	for _, o := range oids {
		e := equality{has: has(o)}
		if e.has {
			e.schema = schema(o, 0)
		}
		out[o] = e
	}
	return out
}

// uniqueIndexSQL lists the columns of each unique index and exclusion
// constraint of a table (expression columns show as NULL).
const uniqueIndexSQL = `
SELECT i.indisexclusion, ARRAY(SELECT a.attname FROM unnest(i.indkey) WITH ORDINALITY k(attnum, n)
       LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
       ORDER BY k.n)::text[], i.indexprs IS NOT NULL OR i.indpred IS NOT NULL
FROM pg_catalog.pg_index i
WHERE i.indrelid = $1 AND (i.indisunique OR i.indisexclusion)`

func lookupUniqueIndexes(ctx context.Context, q Querier, t *Table) error {
	rows, err := q.Query(ctx, uniqueIndexSQL, t.OID)
	if err != nil {
		return fmt.Errorf("reading the unique indexes of target table %s: %w", t.Quoted, err)
	}
	defer rows.Close()
	n, ok := 0, true
	for rows.Next() {
		var excl, partial bool
		var cols []*string
		if err := rows.Scan(&excl, &cols, &partial); err != nil {
			return fmt.Errorf("reading the unique indexes of target table %s: %w", t.Quoted, err)
		}
		n++
		if excl || partial {
			ok = false
		}
		t.UniqueCols = map[string]bool{}
		for _, c := range cols {
			if c == nil {
				ok = false
				continue
			}
			t.UniqueCols[*c] = true
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reading the unique indexes of target table %s: %w", t.Quoted, err)
	}
	t.KeyOnlyUnique = ok && n == 1
	return nil
}
