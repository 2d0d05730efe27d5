package apply

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/apply/internal/initcopy"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/twophase"
)

// dropFacts is what the target holds of an applier.
type dropFacts struct {
	name, slot, systemID string
	others               []string // the other appliers recorded on the target
	origins              []string
	prepared             []string // GIDs of the applier's prepared transactions
	unattributed         []twophase.Prepared
	rows                 []TableRows // tables with rows of the applier
}

func (f *dropFacts) found() bool {
	return f.slot != "" || len(f.origins) > 0 || len(f.prepared) > 0 || len(f.rows) > 0
}

// readDropFacts reads what the target holds of applier name.
func readDropFacts(ctx context.Context, conn *pgx.Conn, name, origin string) (*dropFacts, error) {
	f := &dropFacts{name: name}
	var hasSchema bool
	if err := conn.QueryRow(ctx, "SELECT pg_catalog.to_regclass('walapply.appliers') IS NOT NULL").Scan(&hasSchema); err != nil {
		return nil, fmt.Errorf("looking for walapply.appliers on the target: %w", err)
	}
	var appliers []string
	if hasSchema {
		err := conn.QueryRow(ctx, `SELECT coalesce((SELECT slot_name FROM walapply.appliers WHERE name = $1), (SELECT slot_name FROM walapply.copies WHERE applier = $1), ''),
				coalesce((SELECT source_system_id FROM walapply.appliers WHERE name = $1), ''),
				coalesce((SELECT pg_catalog.array_agg(name ORDER BY name) FROM walapply.appliers), '{}')`, name).
			Scan(&f.slot, &f.systemID, &appliers)
		if err != nil {
			return nil, fmt.Errorf("reading applier %q from walapply.appliers on the target: %w", name, err)
		}
		if f.rows, err = countApplierRows(ctx, conn, name); err != nil {
			return nil, err
		}
	}
	for _, a := range appliers {
		if a != name {
			f.others = append(f.others, a)
		}
	}
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_catalog.pg_replication_origin WHERE roname = $1)", origin).Scan(&exists); err != nil {
		return nil, fmt.Errorf("looking up replication origin %q on the target: %w", origin, err)
	}
	if exists {
		f.origins = append(f.origins, origin)
	}
	copies, err := initcopy.OriginsOf(ctx, conn, name)
	if err != nil {
		return nil, err
	}
	f.origins = append(f.origins, copies...)
	pars, err := parallelOriginsOf(ctx, conn, name) // stream_parallel_origin.go
	if err != nil {
		return nil, err
	}
	for _, o := range slices.Sorted(maps.Keys(pars)) {
		f.origins = append(f.origins, o)
	}
	if err := f.readPrepared(ctx, conn, appliers); err != nil {
		return nil, err
	}
	return f, nil
}

// countApplierRows counts the applier's rows in the walapply schema: its
// walapply.appliers row, and the rows of every other table of the schema
// with an applier column (those that cascade from it included).
func countApplierRows(ctx context.Context, conn *pgx.Conn, name string) ([]TableRows, error) {
	rows, err := conn.Query(ctx, `SELECT c.relname::text FROM pg_catalog.pg_class c
		JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attname = 'applier' AND NOT a.attisdropped
		WHERE n.nspname = 'walapply' AND c.relkind IN ('r', 'p') AND c.relname <> 'appliers' ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("listing the tables of the walapply schema on the target: %w", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("listing the tables of the walapply schema on the target: %w", err)
	}
	var out []TableRows
	for _, t := range append([]string{"appliers"}, tables...) {
		col := "applier"
		if t == "appliers" {
			col = "name"
		}
		var n int64
		q := "SELECT count(*) FROM " + sqlgen.QuoteQualified("walapply", t) + " WHERE " + sqlgen.QuoteIdent(col) + " = $1"
		if err := conn.QueryRow(ctx, q, name).Scan(&n); err != nil {
			return nil, fmt.Errorf("counting applier %q's rows in walapply.%s on the target: %w", name, t, err)
		}
		if n > 0 {
			out = append(out, TableRows{Table: "walapply." + t, Rows: n})
		}
	}
	return out, nil
}

// readPrepared sorts the target database's prepared transactions into the
// applier's (GIDs of --gid-mode applier), other appliers' and the
// unattributed rest.
func (f *dropFacts) readPrepared(ctx context.Context, conn *pgx.Conn, appliers []string) error {
	rows, err := conn.Query(ctx, `SELECT gid, prepared, owner::text, database::text FROM pg_catalog.pg_prepared_xacts
		WHERE database = pg_catalog.current_database() ORDER BY prepared, gid`)
	if err != nil {
		return fmt.Errorf("listing the prepared transactions on the target: %w", err)
	}
	var p twophase.Prepared
	_, err = pgx.ForEachRow(rows, []any{&p.GID, &p.Prepared, &p.Owner, &p.Database}, func() error {
		if _, ok := twophase.ParseTargetGID(f.name, p.GID); ok {
			f.prepared = append(f.prepared, p.GID)
			return nil
		}
		for _, a := range appliers {
			if _, ok := twophase.ParseTargetGID(a, p.GID); ok {
				return nil
			}
		}
		f.unattributed = append(f.unattributed, p)
		return nil
	})
	if err != nil {
		return fmt.Errorf("listing the prepared transactions on the target: %w", err)
	}
	return nil
}
