package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/apply/internal/initcopy"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/apply/internal/sqlgen"
)

// planCopy is initcopy.Decide; its refusals are permanent. This file gives
// the initial copy's decisions and checks (internal/initcopy) apply's error
// kinds: what the package finds, as the errors Run and the preflight report.
func planCopy(f initcopy.Facts) (initcopy.Action, error) {
	act, err := initcopy.Decide(f)
	if err != nil {
		return act, &PermanentError{Err: err}
	}
	return act, nil
}

// listPublishedTables is initcopy.ListPublished; a publication that does
// not exist is permanent.
func listPublishedTables(ctx context.Context, src *pgx.Conn, pubs []string, version int) ([]*initcopy.Table, error) {
	tables, err := initcopy.ListPublished(ctx, src, pubs, version)
	var missing *initcopy.PublicationsMissingError
	if errors.As(err, &missing) {
		return nil, &PermanentError{Err: err}
	}
	return tables, err
}

// checkTargetTables is initcopy.CheckTarget: every problem at once, as a
// permanent *CopyCheckError.
func checkTargetTables(ctx context.Context, q relmap.Querier, tables, todo []*initcopy.Table) error {
	p, err := initcopy.CheckTarget(ctx, q, tables, todo)
	if err != nil {
		return err
	}
	if p.None() {
		return nil
	}
	return &PermanentError{Err: (*CopyCheckError)(p)}
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

func relNamesOf(tables []*initcopy.Table) []sqlgen.Rel {
	ns := make([]sqlgen.Rel, len(tables))
	for i, t := range tables {
		ns[i] = t.Rel
	}
	return ns
}
