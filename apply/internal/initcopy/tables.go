package initcopy

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/apply/internal/sqlgen"
)

// Rel names a table by its schema and name, as the source publishes it
// (sqlgen.Rel, the one name type of apply and its packages).
type Rel = sqlgen.Rel

// Table is one published table to copy.
type Table struct {
	Rel
	// Partitioned: on the source, relkind 'p' (published through its
	// root).
	Partitioned bool
	cols        []string // source columns to copy, in column order
	filter      string   // the publications' row filter, "" for none
	estRows     int64    // the source's estimate (reltuples), 0 when unknown

	targetPartitioned bool
	// copyCols are the columns copied: cols without those generated on
	// the target, which the applier does not write either.
	copyCols []string
	// resetFirst: an interrupted attempt copied some of its ranges; it is
	// emptied before it is copied again (ranges.go).
	resetFirst bool
}

func (t *Table) String() string { return sqlgen.QuoteQualified(t.Schema, t.Name) }

// logName is the table as log fields name it (sqlgen.LogRelation).
func (t *Table) logName() string { return sqlgen.LogRelation(t.Schema, t.Name) }

// FromItem is the FROM item that reads exactly this table's rows: ONLY for a
// plain table, whose inheritance children are published (and copied) as
// tables of their own; a partitioned table is published with its
// partitions' rows (publish_via_partition_root).
func FromItem(name string, partitioned bool) string {
	if partitioned {
		return name
	}
	return "ONLY " + name
}

// copyOutSQL reads the table's published rows and columns on the source,
// those meeting cond when it is not "" (a range, ranges.go).
func (t *Table) copyOutSQL(cond string) string {
	sql := "COPY (SELECT " + sqlgen.QuoteList(t.copyCols) + " FROM " + FromItem(t.String(), t.Partitioned)
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
func (t *Table) copyInSQL() string {
	return "COPY " + t.String() + " (" + sqlgen.QuoteList(t.copyCols) + ") FROM STDIN"
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

// PublicationsMissingError is ListPublished's error when publications do
// not exist on the source; retrying cannot fix it.
type PublicationsMissingError struct{ Names []string }

func (e *PublicationsMissingError) Error() string {
	return fmt.Sprintf("publication(s) %s do not exist on the source", strings.Join(e.Names, ", "))
}

// ListPublished returns the tables the publications publish, each once,
// with the union of their columns and row filters as PostgreSQL's
// tablesync combines them: a table published without a filter by any of
// the publications is copied whole. Publications that do not exist are a
// *PublicationsMissingError.
func ListPublished(ctx context.Context, src *pgx.Conn, pubs []string, version int) ([]*Table, error) {
	var missing []string
	if err := src.QueryRow(ctx, `SELECT coalesce(array_agg(p ORDER BY p), '{}') FROM unnest($1::text[]) p
		WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_publication WHERE pubname = p)`, pubs).Scan(&missing); err != nil {
		return nil, fmt.Errorf("looking up the publications on the source: %w", err)
	}
	if len(missing) > 0 {
		return nil, &PublicationsMissingError{missing}
	}
	rows, err := src.Query(ctx, publishedTablesSQL(version), pubs)
	if err != nil {
		return nil, fmt.Errorf("listing the published tables on the source: %w", err)
	}
	defer rows.Close()
	var out []*Table
	byName := map[Rel]*Table{}
	for rows.Next() {
		var t Table
		var filter *string
		if err := rows.Scan(&t.Schema, &t.Name, &t.Partitioned, &t.estRows, &filter, &t.cols); err != nil {
			return nil, fmt.Errorf("listing the published tables on the source: %w", err)
		}
		if prev := byName[t.Rel]; prev != nil {
			prev.union(filter, t.cols)
			continue
		}
		if filter != nil {
			t.filter = "(" + *filter + ")"
		}
		byName[t.Rel] = &t
		out = append(out, &t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing the published tables on the source: %w", err)
	}
	return out, nil
}

// union adds another publication's row filter (nil: none, so the table is
// copied whole) and columns to a table published by several.
func (t *Table) union(filter *string, cols []string) {
	switch {
	case filter == nil:
		t.filter = ""
	case t.filter != "":
		t.filter += " OR (" + *filter + ")"
	}
	for _, c := range cols {
		if !slices.Contains(t.cols, c) {
			t.cols = append(t.cols, c)
		}
	}
}
