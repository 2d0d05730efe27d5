package apply

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/apply/internal/sqlgen"
)

// copyTable is one published table to copy.
type copyTable struct {
	relName
	partitioned bool     // on the source: relkind 'p' (published through its root)
	cols        []string // source columns to copy, in column order
	filter      string   // the publications' row filter, "" for none
	estRows     int64    // the source's estimate (reltuples), 0 when unknown

	targetPartitioned bool
	// copyCols are the columns copied: cols without those generated on
	// the target, which the applier does not write either.
	copyCols []string
	// resetFirst: an interrupted attempt copied some of its ranges; it is
	// emptied before it is copied again (copy_ranges.go).
	resetFirst bool
}

func (t *copyTable) String() string { return sqlgen.QuoteQualified(t.schema, t.name) }

// fromItem is the FROM item that reads exactly this table's rows: ONLY for a
// plain table, whose inheritance children are published (and copied) as
// tables of their own; a partitioned table is published with its
// partitions' rows (publish_via_partition_root).
func fromItem(name string, partitioned bool) string {
	if partitioned {
		return name
	}
	return "ONLY " + name
}

func quoteList(cols []string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = sqlgen.QuoteIdent(c)
	}
	return strings.Join(q, ", ")
}

// copyOutSQL reads the table's published rows and columns on the source,
// those meeting cond when it is not "" (a range, copy_ranges.go).
func (t *copyTable) copyOutSQL(cond string) string {
	sql := "COPY (SELECT " + quoteList(t.copyCols) + " FROM " + fromItem(t.String(), t.partitioned)
	switch {
	case t.filter != "" && cond != "":
		sql += " WHERE " + t.filter + " AND " + cond
	case t.filter != "":
		sql += " WHERE " + t.filter
	case cond != "":
		sql += " WHERE " + cond
	}
	return sql + ") TO STDOUT"
}

// copyInSQL writes them on the target.
func (t *copyTable) copyInSQL() string {
	return "COPY " + t.String() + " (" + quoteList(t.copyCols) + ") FROM STDIN"
}

// publishedTablesSQL lists the publications' tables with their published
// columns and row filters (pg_publication_tables has both from PostgreSQL
// 15 on; before, every column is published and there are no filters).
// Generated columns are published only from PostgreSQL 18 on, when the
// publication says so (attnames then lists them).
func publishedTablesSQL(version int) string {
	cols, filter := "a.attgenerated = ''", "NULL::text"
	switch {
	case version >= 180000:
		cols, filter = "a.attname = ANY (p.attnames)", "p.rowfilter"
	case version >= 150000:
		cols, filter = "a.attname = ANY (p.attnames) AND a.attgenerated = ''", "p.rowfilter"
	case version < 120000:
		cols = "true"
	}
	return `SELECT p.schemaname::text, p.tablename::text, c.relkind = 'p', greatest(c.reltuples, 0)::bigint, ` + filter + `,
       ARRAY(SELECT a.attname::text FROM pg_catalog.pg_attribute a
             WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped AND ` + cols + `
             ORDER BY a.attnum)
FROM pg_catalog.pg_publication_tables p
JOIN pg_catalog.pg_namespace n ON n.nspname = p.schemaname
JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid AND c.relname = p.tablename
WHERE p.pubname = ANY ($1)
ORDER BY 1, 2`
}

// listPublishedTables returns the tables the publications publish, each
// once, with the union of their columns and row filters as PostgreSQL's
// tablesync combines them: a table published without a filter by any of
// the publications is copied whole.
func listPublishedTables(ctx context.Context, src *pgx.Conn, pubs []string, version int) ([]*copyTable, error) {
	var missing []string
	if err := src.QueryRow(ctx, `SELECT coalesce(array_agg(p ORDER BY p), '{}') FROM unnest($1::text[]) p
		WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_publication WHERE pubname = p)`, pubs).Scan(&missing); err != nil {
		return nil, fmt.Errorf("looking up the publications on the source: %w", err)
	}
	if len(missing) > 0 {
		return nil, &PermanentError{fmt.Errorf("publication(s) %s do not exist on the source", strings.Join(missing, ", "))}
	}
	rows, err := src.Query(ctx, publishedTablesSQL(version), pubs)
	if err != nil {
		return nil, fmt.Errorf("listing the published tables on the source: %w", err)
	}
	defer rows.Close()
	var out []*copyTable
	byName := map[relName]*copyTable{}
	for rows.Next() {
		var t copyTable
		var filter *string
		if err := rows.Scan(&t.schema, &t.name, &t.partitioned, &t.estRows, &filter, &t.cols); err != nil {
			return nil, fmt.Errorf("listing the published tables on the source: %w", err)
		}
		prev := byName[t.relName]
		if prev == nil {
			if filter != nil {
				t.filter = "(" + *filter + ")"
			}
			byName[t.relName] = &t
			out = append(out, &t)
			continue
		}
		// Published by several publications.
		switch {
		case filter == nil:
			prev.filter = ""
		case prev.filter != "":
			prev.filter += " OR (" + *filter + ")"
		}
		for _, c := range t.cols {
			if !slices.Contains(prev.cols, c) {
				prev.cols = append(prev.cols, c)
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing the published tables on the source: %w", err)
	}
	return out, nil
}

// CopyCheckError lists everything about the target that keeps the initial
// copy from starting, all at once.
type CopyCheckError struct {
	MissingTables  []string            // published tables the target lacks (quoted, schema-qualified)
	MissingColumns map[string][]string // published columns a target table lacks, by table
	NotEmpty       []string            // tables to copy that already hold rows
	NoColumns      []string            // tables with no column the copy could write
}

func (e *CopyCheckError) Error() string {
	var parts []string
	if len(e.MissingTables) > 0 {
		parts = append(parts, fmt.Sprintf("%d published table(s) missing on the target: %s (create them with the source's columns, e.g. from pg_dump --schema-only: the schema is yours to manage, as with PostgreSQL's subscriber)",
			len(e.MissingTables), strings.Join(e.MissingTables, ", ")))
	}
	if len(e.MissingColumns) > 0 {
		tables := make([]string, 0, len(e.MissingColumns))
		for t := range e.MissingColumns {
			tables = append(tables, t)
		}
		slices.Sort(tables)
		var b strings.Builder
		for i, t := range tables {
			if i > 0 {
				b.WriteString("; ")
			}
			fmt.Fprintf(&b, "%s lacks %s", t, strings.Join(e.MissingColumns[t], ", "))
		}
		parts = append(parts, "published column(s) missing on the target: "+b.String()+" (add them)")
	}
	if len(e.NoColumns) > 0 {
		parts = append(parts, "table(s) with no column to copy (every published column is generated on the target): "+strings.Join(e.NoColumns, ", "))
	}
	if len(e.NotEmpty) > 0 {
		parts = append(parts, fmt.Sprintf("%d target table(s) not empty: %s (the copy fills empty tables: TRUNCATE them on the target, or run without --copy if they already hold the source's data)",
			len(e.NotEmpty), strings.Join(e.NotEmpty, ", ")))
	}
	return "the target is not ready for the initial copy: " + strings.Join(parts, "; ")
}

// targetColumnsSQL reads, for each of the given tables, whether it exists
// and its columns.
const targetColumnsSQL = `
SELECT t.ord::int, c.relkind = 'p', a.attname::text, coalesce(a.attgenerated <> '', false)
FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS t(s, n, ord)
JOIN pg_catalog.pg_namespace ns ON ns.nspname = t.s
JOIN pg_catalog.pg_class c ON c.relnamespace = ns.oid AND c.relname = t.n AND c.relkind IN ('r', 'p')
LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped`

// checkTargetTables checks that every published table exists on the
// target with every published column and that the tables to copy are
// empty, and works out the columns to copy. It reports every problem at
// once, as a permanent *CopyCheckError.
func checkTargetTables(ctx context.Context, q relmap.Querier, tables, todo []*copyTable) error {
	schemas := make([]string, len(tables))
	names := make([]string, len(tables))
	for i, t := range tables {
		schemas[i], names[i] = t.schema, t.name
	}
	rows, err := q.Query(ctx, targetColumnsSQL, schemas, names)
	if err != nil {
		return fmt.Errorf("reading the target catalog for the initial copy: %w", err)
	}
	found := make([]bool, len(tables))
	generated := make([]map[string]bool, len(tables)) // column -> generated
	for rows.Next() {
		var ord int
		var partitioned, gen bool
		var col *string
		if err := rows.Scan(&ord, &partitioned, &col, &gen); err != nil {
			rows.Close()
			return fmt.Errorf("reading the target catalog for the initial copy: %w", err)
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
		return fmt.Errorf("reading the target catalog for the initial copy: %w", err)
	}
	e := &CopyCheckError{MissingColumns: map[string][]string{}}
	for i, t := range tables {
		if !found[i] {
			e.MissingTables = append(e.MissingTables, t.String())
			continue
		}
		t.copyCols = t.copyCols[:0]
		for _, c := range t.cols {
			gen, ok := generated[i][c]
			switch {
			case !ok:
				e.MissingColumns[t.String()] = append(e.MissingColumns[t.String()], sqlgen.QuoteIdent(c))
			case !gen:
				t.copyCols = append(t.copyCols, c)
			}
		}
	}
	for _, t := range todo {
		i := slices.Index(tables, t)
		if !found[i] || len(e.MissingColumns[t.String()]) > 0 {
			continue
		}
		if len(t.copyCols) == 0 {
			e.NoColumns = append(e.NoColumns, t.String())
			continue
		}
		if t.resetFirst {
			continue // emptied before it is copied again
		}
		empty, err := targetEmpty(ctx, q, t)
		if err != nil {
			return err
		}
		if !empty {
			e.NotEmpty = append(e.NotEmpty, t.String())
		}
	}
	if len(e.MissingTables) == 0 && len(e.MissingColumns) == 0 && len(e.NotEmpty) == 0 && len(e.NoColumns) == 0 {
		return nil
	}
	return &PermanentError{e}
}

// targetEmpty reports whether a target table holds no rows.
func targetEmpty(ctx context.Context, q relmap.Querier, t *copyTable) (bool, error) {
	rows, err := q.Query(ctx, "SELECT 1 FROM "+fromItem(t.String(), t.targetPartitioned)+" LIMIT 1")
	if err != nil {
		return false, fmt.Errorf("checking that target table %s is empty: %w", t, err)
	}
	defer rows.Close()
	empty := !rows.Next()
	return empty, rows.Err()
}
