package initcopy

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/apply/internal/relmap"
)

// States of a table in walapply.copy_state.status.
//
// A table removed from the publications keeps its row with published =
// false: the source stops sending its changes, its rows on the target
// stay, and the stream may still bring changes it made before it was
// removed, which must apply (or be filtered) as before. A table removed
// and published again is copied again, as PostgreSQL's refresh does; the
// copy needs the target table empty and says so.
//
// An applier without --copy (no walapply.copies row) cannot copy: a table
// published later is applied from its first change on, and its earlier
// rows are missing on the target. It is logged once as a warning and
// recorded 'not_copied' ("published, not copied" in walapply status). At
// its first start the tables it finds are recorded 'existing': the target
// was filled otherwise.
const (
	StatusPending   = "pending"
	StatusCopied    = "copied" // copied while the stream went on, not caught up yet (apply/refresh_sync.go)
	StatusDone      = "done"
	StatusExisting  = "existing"
	StatusNotCopied = "not_copied"
)

// SyncTableList brings a resumed copy's table list up to date with the
// publications: tables added since are copied too, tables dropped from
// them are forgotten unless already copied.
func SyncTableList(ctx context.Context, conn *pgx.Conn, applier string, tables []*Table) error {
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var schemas, names []string
		for _, t := range tables {
			schemas, names = append(schemas, t.Schema), append(names, t.Name)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM walapply.copy_state s WHERE applier = $1 AND status = 'pending'
			AND (schema_name, table_name) NOT IN (SELECT * FROM unnest($2::text[], $3::text[]))`, applier, schemas, names); err != nil {
			return err
		}
		return InsertPending(ctx, tx, applier, tables)
	})
	if err != nil {
		return fmt.Errorf("updating the table list in walapply.copy_state on the target: %w", err)
	}
	return nil
}

// InsertPending records tables to copy, pending, unless recorded already.
func InsertPending(ctx context.Context, tx pgx.Tx, applier string, tables []*Table) error {
	var schemas, names []string
	for _, t := range tables {
		schemas, names = append(schemas, t.Schema), append(names, t.Name)
	}
	_, err := tx.Exec(ctx, `INSERT INTO walapply.copy_state (applier, schema_name, table_name)
		SELECT $1, s, n FROM unnest($2::text[], $3::text[]) t(s, n) ON CONFLICT DO NOTHING`, applier, schemas, names)
	return err
}

// Todo returns the tables an attempt copies: all of them, or for a
// resumed copy those not done yet, marked to be emptied first when an
// interrupted attempt copied some of their ranges (MarkRanged).
func Todo(ctx context.Context, q relmap.Querier, applier string, tables []*Table, resume bool) ([]*Table, error) {
	if !resume {
		return tables, nil
	}
	done, err := readDone(ctx, q, applier)
	if err != nil {
		return nil, err
	}
	var todo []*Table
	for _, t := range tables {
		if !done[t.Rel] {
			todo = append(todo, t)
		}
	}
	if err := MarkRanged(ctx, q, applier, todo); err != nil {
		return nil, err
	}
	return todo, nil
}

// readDone returns the tables whose copy committed.
func readDone(ctx context.Context, q relmap.Querier, applier string) (map[Rel]bool, error) {
	rows, err := q.Query(ctx, `SELECT schema_name, table_name FROM walapply.copy_state WHERE applier = $1 AND status = 'done'`, applier)
	if err != nil {
		return nil, fmt.Errorf("reading walapply.copy_state on the target: %w", err)
	}
	done, err := pgx.CollectRows(rows, scanRel)
	if err != nil {
		return nil, fmt.Errorf("reading walapply.copy_state on the target: %w", err)
	}
	m := make(map[Rel]bool, len(done))
	for _, n := range done {
		m[n] = true
	}
	return m, nil
}

func scanRel(r pgx.CollectableRow) (Rel, error) {
	var n Rel
	return n, r.Scan(&n.Schema, &n.Name)
}
