package apply

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/apply/internal/initcopy"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/state"
)

// knownTable is a table's row in walapply.copy_state.
//
// The tables an applier knows, in walapply.copy_state (refresh.go).
type knownTable struct {
	status    string
	published bool
}

// readKnownTables reads the tables walapply.copy_state has for applier.
func readKnownTables(ctx context.Context, q relmap.Querier, applier string) (map[sqlgen.Rel]knownTable, error) {
	rows, err := q.Query(ctx, `SELECT schema_name, table_name, status, published FROM walapply.copy_state WHERE applier = $1`, applier)
	if err != nil {
		return nil, fmt.Errorf("reading walapply.copy_state on the target: %w", err)
	}
	defer rows.Close()
	known := map[sqlgen.Rel]knownTable{}
	for rows.Next() {
		var n sqlgen.Rel
		var k knownTable
		if err := rows.Scan(&n.Schema, &n.Name, &k.status, &k.published); err != nil {
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
func recordNotCopied(ctx context.Context, q state.Querier, applier string, tables []sqlgen.Rel) error {
	return upsertTables(ctx, q, applier, tables, initcopy.StatusNotCopied)
}

func splitNames(ns []sqlgen.Rel) (schemas, names []string) {
	for _, n := range ns {
		schemas, names = append(schemas, n.Schema), append(names, n.Name)
	}
	return schemas, names
}

// upsertTables records tables in state, published: new ones are inserted,
// known ones (published again, or pending) start over in that state.
func upsertTables(ctx context.Context, q state.Querier, applier string, ns []sqlgen.Rel, state string) error {
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
func insertTables(ctx context.Context, q state.Querier, applier string, ns []sqlgen.Rel, state string, published bool) error {
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
func setPublished(ctx context.Context, q state.Querier, applier string, ns []sqlgen.Rel, published bool) error {
	if len(ns) == 0 {
		return nil
	}
	schemas, names := splitNames(ns)
	_, err := q.Exec(ctx, `UPDATE walapply.copy_state SET published = $4 WHERE applier = $1
		AND (schema_name, table_name) IN (SELECT * FROM unnest($2::text[], $3::text[]))`, applier, schemas, names, published)
	return err
}

// emptyTable deletes a table's rows on the target, which a background
// copy committed before the session ended, and makes it pending again.
// DELETE, not TRUNCATE: foreign keys from other tables do not block it
// under session_replication_role = replica.
func emptyTable(ctx context.Context, conn *pgx.Conn, applier string, t *initcopy.Table) error {
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var partitioned bool
		if err := tx.QueryRow(ctx, `SELECT c.relkind = 'p' FROM pg_catalog.pg_class c
			JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2`,
			t.Schema, t.Name).Scan(&partitioned); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "SET LOCAL session_replication_role = replica"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM "+initcopy.FromItem(t.String(), partitioned)); err != nil {
			return err
		}
		return upsertTables(ctx, tx, applier, []sqlgen.Rel{t.Rel}, initcopy.StatusPending)
	})
	if err != nil {
		return fmt.Errorf("emptying table %s on the target to copy it again: %w", t, err)
	}
	return nil
}
