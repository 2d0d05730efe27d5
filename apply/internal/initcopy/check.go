package initcopy

import (
	"context"
	"fmt"
	"slices"

	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/apply/internal/sqlgen"
)

// Problems is everything about the target that keeps the copy from
// starting, found at once (CheckTarget); apply reports it as its public
// CopyCheckError, whose fields these are.
type Problems struct {
	MissingTables  []string            // published tables the target lacks (quoted, schema-qualified)
	MissingColumns map[string][]string // published columns a target table lacks, by table
	NotEmpty       []string            // tables to copy that already hold rows
	NoColumns      []string            // tables with no column the copy could write
}

// None reports whether nothing keeps the copy from starting.
func (p *Problems) None() bool {
	return len(p.MissingTables) == 0 && len(p.MissingColumns) == 0 && len(p.NotEmpty) == 0 && len(p.NoColumns) == 0
}

// targetColumnsSQL reads, for each of the given tables, whether it exists
// and its columns.
const targetColumnsSQL = `
SELECT t.ord::int, c.relkind = 'p', a.attname::text, coalesce(a.attgenerated <> '', false)
FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS t(s, n, ord)
JOIN pg_catalog.pg_namespace ns ON ns.nspname = t.s
JOIN pg_catalog.pg_class c ON c.relnamespace = ns.oid AND c.relname = t.n AND c.relkind IN ('r', 'p')
LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped`

// CheckTarget checks that every published table exists on the target
// with every published column and that the tables to copy (todo, among
// tables) are empty, and works out the columns to copy. It returns every
// problem at once; the error is of reading the catalog.
func CheckTarget(ctx context.Context, q relmap.Querier, tables, todo []*Table) (*Problems, error) {
	schemas := make([]string, len(tables))
	names := make([]string, len(tables))
	for i, t := range tables {
		schemas[i], names[i] = t.Schema, t.Name
	}
	rows, err := q.Query(ctx, targetColumnsSQL, schemas, names)
	if err != nil {
		return nil, fmt.Errorf("reading the target catalog for the initial copy: %w", err)
	}
	found := make([]bool, len(tables))
	generated := make([]map[string]bool, len(tables)) // column -> generated
	for rows.Next() {
		var ord int
		var partitioned, gen bool
		var col *string
		if err := rows.Scan(&ord, &partitioned, &col, &gen); err != nil {
			rows.Close()
			return nil, fmt.Errorf("reading the target catalog for the initial copy: %w", err)
		}
		i := ord - 1
		if !found[i] {
			found[i], generated[i] = true, map[string]bool{}
		}
		tables[i].targetPartitioned = partitioned
		if col != nil {
			generated[i][*col] = gen
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading the target catalog for the initial copy: %w", err)
	}
	p := &Problems{MissingColumns: map[string][]string{}}
	for i, t := range tables {
		if !found[i] {
			p.MissingTables = append(p.MissingTables, t.String())
			continue
		}
		t.copyCols = t.copyCols[:0]
		for _, c := range t.cols {
			gen, ok := generated[i][c]
			switch {
			case !ok:
				p.MissingColumns[t.String()] = append(p.MissingColumns[t.String()], sqlgen.QuoteIdent(c))
			case !gen:
				t.copyCols = append(t.copyCols, c)
			}
		}
	}
	for _, t := range todo {
		i := slices.Index(tables, t)
		if !found[i] || len(p.MissingColumns[t.String()]) > 0 {
			continue
		}
		if len(t.copyCols) == 0 {
			p.NoColumns = append(p.NoColumns, t.String())
			continue
		}
		if t.resetFirst {
			continue // emptied before it is copied again
		}
		empty, err := targetEmpty(ctx, q, t)
		if err != nil {
			return nil, err
		}
		if !empty {
			p.NotEmpty = append(p.NotEmpty, t.String())
		}
	}
	return p, nil
}

// targetEmpty reports whether a target table holds no rows.
func targetEmpty(ctx context.Context, q relmap.Querier, t *Table) (bool, error) {
	rows, err := q.Query(ctx, "SELECT 1 FROM "+FromItem(t.String(), t.targetPartitioned)+" LIMIT 1")
	if err != nil {
		return false, fmt.Errorf("checking that target table %s is empty: %w", t, err)
	}
	defer rows.Close()
	empty := !rows.Next()
	return empty, rows.Err()
}
