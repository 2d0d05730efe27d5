package apply

import (
	"context"
	"fmt"

	"github.com/walapply/walapply/state"
)

// The tables an applier knows, in walapply.copy_state (refresh.go).

// knownTable is a table's row in walapply.copy_state.
type knownTable struct {
	status    string
	published bool
}

// readKnownTables reads the tables walapply.copy_state has for applier.
func readKnownTables(ctx context.Context, q querier, applier string) (map[relName]knownTable, error) {
	rows, err := q.Query(ctx, `SELECT schema_name, table_name, status, published FROM walapply.copy_state WHERE applier = $1`, applier)
	if err != nil {
		return nil, fmt.Errorf("reading walapply.copy_state on the target: %w", err)
	}
	defer rows.Close()
	known := map[relName]knownTable{}
	for rows.Next() {
		var n relName
		var k knownTable
		if err := rows.Scan(&n.schema, &n.name, &k.status, &k.published); err != nil {
			return nil, fmt.Errorf("reading walapply.copy_state on the target: %w", err)
		}
		known[n] = k
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading walapply.copy_state on the target: %w", err)
	}
	return known, nil
}

// recordNotCopied records tables published later to an applier that
// does not copy them.
func recordNotCopied(ctx context.Context, q state.Querier, applier string, tables []relName) error {
	return upsertTables(ctx, q, applier, tables, tableNotCopied)
}

func splitNames(ns []relName) (schemas, names []string) {
	for _, n := range ns {
		schemas, names = append(schemas, n.schema), append(names, n.name)
	}
	return schemas, names
}

// upsertTables records tables in state, published: new ones are inserted,
// known ones (published again, or pending) start over in that state.
func upsertTables(ctx context.Context, q state.Querier, applier string, ns []relName, state string) error {
	if len(ns) == 0 {
		return nil
	}
	schemas, names := splitNames(ns)
	_, err := q.Exec(ctx, `INSERT INTO walapply.copy_state (applier, schema_name, table_name, status, published)
		SELECT $1, s, n, $4, true FROM unnest($2::text[], $3::text[]) t(s, n)
		ON CONFLICT (applier, schema_name, table_name) DO UPDATE SET status = EXCLUDED.status, published = true,
			rows = NULL, bytes = NULL, copy_lsn = NULL, snapshot = NULL, finished_at = NULL, added_at = now()`,
		applier, schemas, names, state)
	return err
}

// insertTables records tables that are not known yet.
func insertTables(ctx context.Context, q state.Querier, applier string, ns []relName, state string, published bool) error {
	if len(ns) == 0 {
		return nil
	}
	schemas, names := splitNames(ns)
	_, err := q.Exec(ctx, `INSERT INTO walapply.copy_state (applier, schema_name, table_name, status, published)
		SELECT $1, s, n, $4, $5 FROM unnest($2::text[], $3::text[]) t(s, n) ON CONFLICT DO NOTHING`,
		applier, schemas, names, state, published)
	return err
}

// setPublished marks tables as (no longer) published.
func setPublished(ctx context.Context, q state.Querier, applier string, ns []relName, published bool) error {
	if len(ns) == 0 {
		return nil
	}
	schemas, names := splitNames(ns)
	_, err := q.Exec(ctx, `UPDATE walapply.copy_state SET published = $4 WHERE applier = $1
		AND (schema_name, table_name) IN (SELECT * FROM unnest($2::text[], $3::text[]))`, applier, schemas, names, published)
	return err
}
