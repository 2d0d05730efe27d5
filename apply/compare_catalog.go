package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/apply/internal/sqlgen"
)

// publishedTables reads what the publications publish (every publication
// when pubs is empty), in the source's snapshot: per table its published
// columns in column order, whether it is partitioned, its row filter (the
// filters of several publications OR-ed, none if one has none) and its
// primary key (for --keys). Largest tables first, so that the slowest
// start first.
func publishedTables(ctx context.Context, conn *pgx.Conn, pubs []string) ([]comparedTable, error) {
	if len(pubs) > 0 {
		var missing []string
		err := conn.QueryRow(ctx, `SELECT coalesce(array_agg(p ORDER BY p), '{}') FROM unnest($1::text[]) p
			WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_publication WHERE pubname = p)`, pubs).Scan(&missing)
		if err != nil {
			return nil, fmt.Errorf("looking up the publications on the source: %w", err)
		}
		if len(missing) > 0 {
			return nil, fmt.Errorf("%w: publication(s) %s do not exist on the source", ErrConfig, strings.Join(missing, ", "))
		}
	}
	var version int
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
		return nil, fmt.Errorf("reading the source's version: %w", err)
	}
	// PostgreSQL 15 added column lists and row filters.
	cols, filter := "NULL::name[]", "NULL::text"
	if version >= 150000 {
		cols, filter = "pt.attnames", "pt.rowfilter"
	}
	rows, err := conn.Query(ctx, `SELECT c.oid, pt.schemaname::text, pt.tablename::text, c.relkind = 'p',
			`+cols+`::text[], `+filter+`
		FROM pg_catalog.pg_publication_tables pt
		JOIN pg_catalog.pg_namespace n ON n.nspname = pt.schemaname
		JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid AND c.relname = pt.tablename
		WHERE coalesce(cardinality($1::text[]), 0) = 0 OR pt.pubname = ANY ($1::text[])
		ORDER BY pg_catalog.pg_total_relation_size(c.oid) DESC, 2, 3`, pubs)
	if err != nil {
		return nil, fmt.Errorf("listing the published tables on the source: %w", err)
	}
	type entry struct {
		t         comparedTable
		oid       uint32
		published map[string]bool // nil: every column
		filters   []string
		unfilterd bool
	}
	var order []uint32
	byOID := map[uint32]*entry{}
	for rows.Next() {
		var oid uint32
		var t comparedTable
		var attnames []string
		var rowFilter *string
		if err := rows.Scan(&oid, &t.schema, &t.name, &t.partitioned, &attnames, &rowFilter); err != nil {
			rows.Close()
			return nil, fmt.Errorf("listing the published tables on the source: %w", err)
		}
		e := byOID[oid]
		if e == nil {
			e = &entry{t: t, oid: oid}
			if attnames != nil {
				e.published = map[string]bool{}
			}
			byOID[oid] = e
			order = append(order, oid)
		}
		if attnames == nil {
			e.published = nil
		} else if e.published != nil {
			for _, a := range attnames {
				e.published[a] = true
			}
		}
		if rowFilter == nil {
			e.unfilterd = true
		} else {
			e.filters = append(e.filters, "("+*rowFilter+")")
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing the published tables on the source: %w", err)
	}
	tables := make([]comparedTable, 0, len(order))
	for _, oid := range order {
		e := byOID[oid]
		if !e.unfilterd {
			slices.Sort(e.filters)
			e.t.filter = strings.Join(slices.Compact(e.filters), " OR ")
		}
		if err := readTableColumns(ctx, conn, oid, &e.t, e.published); err != nil {
			return nil, err
		}
		tables = append(tables, e.t)
	}
	return tables, nil
}

// readTableColumns reads a source table's published columns and its key.
func readTableColumns(ctx context.Context, conn *pgx.Conn, oid uint32, t *comparedTable, published map[string]bool) error {
	rows, err := conn.Query(ctx, `SELECT a.attname::text, pg_catalog.format_type(a.atttypid, NULL), a.attgenerated <> '',
			coalesce((SELECT u.o FROM unnest(k.indkey::int2[]) WITH ORDINALITY u(n, o) WHERE u.n = a.attnum), 0)::int
		FROM pg_catalog.pg_attribute a
		LEFT JOIN LATERAL (SELECT i.indkey FROM pg_catalog.pg_index i WHERE i.indrelid = a.attrelid AND (i.indisprimary OR i.indisreplident)
			ORDER BY i.indisprimary DESC LIMIT 1) k ON true
		WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, oid)
	if err != nil {
		return fmt.Errorf("reading the columns of table %s on the source: %w", sqlgen.QuoteQualified(t.schema, t.name), err)
	}
	type keyCol struct {
		pos  int
		name string
	}
	var key []keyCol
	for rows.Next() {
		var name, typ string
		var generated bool
		var keyPos int
		if err := rows.Scan(&name, &typ, &generated, &keyPos); err != nil {
			rows.Close()
			return fmt.Errorf("reading the columns of table %s on the source: %w", sqlgen.QuoteQualified(t.schema, t.name), err)
		}
		if published[name] || published == nil && !generated {
			t.columns = append(t.columns, name)
			t.types = append(t.types, typ)
		}
		if keyPos > 0 {
			key = append(key, keyCol{keyPos, name})
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reading the columns of table %s on the source: %w", sqlgen.QuoteQualified(t.schema, t.name), err)
	}
	slices.SortFunc(key, func(a, b keyCol) int { return a.pos - b.pos })
	for _, k := range key {
		t.key = append(t.key, k.name)
	}
	return nil
}

// targetTable is what compare needs of a published table on the target.
type targetTable struct {
	partitioned bool
	// reason says why the table cannot be compared (it, or a published
	// column, is missing), "" when it can.
	reason string
	types  map[string]string // format_type of each column, by name
}

// lookupTargetTable looks a table up on the target.
func lookupTargetTable(ctx context.Context, conn *pgx.Conn, t comparedTable) (targetTable, error) {
	var relkind *string
	var columns, types []string
	err := conn.QueryRow(ctx, `SELECT c.relkind::text,
			coalesce(array_agg(a.attname::text ORDER BY a.attnum) FILTER (WHERE a.attnum IS NOT NULL), '{}'),
			coalesce(array_agg(pg_catalog.format_type(a.atttypid, NULL) ORDER BY a.attnum) FILTER (WHERE a.attnum IS NOT NULL), '{}')
		FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
		WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p') GROUP BY c.relkind`, t.schema, t.name).Scan(&relkind, &columns, &types)
	if errors.Is(err, pgx.ErrNoRows) {
		return targetTable{reason: "missing on the target"}, nil
	}
	if err != nil {
		return targetTable{}, fmt.Errorf("looking up table %s on the target: %w", sqlgen.QuoteQualified(t.schema, t.name), err)
	}
	tt := targetTable{partitioned: *relkind == "p", types: make(map[string]string, len(columns))}
	for i, c := range columns {
		tt.types[c] = types[i]
	}
	var missing []string
	for _, c := range t.columns {
		if _, ok := tt.types[c]; !ok {
			missing = append(missing, sqlgen.QuoteIdent(c))
		}
	}
	if len(missing) > 0 {
		tt.reason = "published column(s) " + strings.Join(missing, ", ") + " missing on the target"
	}
	return tt, nil
}
