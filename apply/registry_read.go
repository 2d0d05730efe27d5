package apply

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Registered is an applier as the target's walapply schema records it: its
// row in walapply.appliers, its initial copy (walapply.copies) and the
// tables it knows (walapply.copy_state, walapply.copy_ranges), as
// pg_subscription and pg_subscription_rel record a subscription. It is
// what `walapply status` shows of an applier besides the live state of the
// servers; ReadRegistered reads it and changes nothing. The walapply
// schema's layout stays inside this package.
type Registered struct {
	Name, Slot, Origin string
	Publications       []string
	SourceSystemID     string
	SourceTimeline     int32
	CreatedAt          time.Time
	UpdatedAt          *time.Time
	// UntilLSN is the stop position of the latest start with --until (""
	// if it had none); UntilReachedAt is when it got there (nil: not yet).
	UntilLSN       string
	UntilReachedAt *time.Time
	// Copy is the initial copy (walapply run --copy); nil if none was made.
	Copy *RegisteredCopy
	// Tables are the tables the applier knows, by schema and name.
	Tables []RegisteredTable
}

// RegisteredCopy is how far an applier's initial copy got.
type RegisteredCopy struct {
	StartedAt  time.Time
	FinishedAt *time.Time // nil: not finished
	// Tables counts the tables to copy, TablesDone those copied, Rows the
	// rows copied; Pending the tables still to copy (one published later
	// keeps a finished copy incomplete).
	Tables, TablesDone, Pending int
	Rows                        int64
}

// RegisteredTable is one table an applier knows.
type RegisteredTable struct {
	Schema, Name string
	// State is "pending", "copied", "done", "existing" or "not_copied"
	// (the states of walapply.copy_state; `walapply status` explains them).
	State string
	// Published is false for a table no longer in the publications.
	Published bool
	CopyLSN   string     // the snapshot's position a copied table was read at
	Rows      *int64     // rows copied
	CopiedAt  *time.Time // when its copy finished
	AddedAt   time.Time
	// RangesDone of RangesTotal: a table copied in ranges
	// (--copy-split-size); 0 of 0 for the others.
	RangesDone, RangesTotal int
}

// ReadRegistered reads every applier the target's walapply schema records,
// by name, or only the one named name; an unknown name, or a target on
// which no applier ever ran, is an error saying so.
func ReadRegistered(ctx context.Context, conn *pgx.Conn, name string) ([]Registered, error) {
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT pg_catalog.to_regclass('walapply.appliers') IS NOT NULL").Scan(&exists); err != nil {
		return nil, fmt.Errorf("looking for walapply.appliers on the target: %w", err)
	}
	if !exists {
		return nil, errors.New("no walapply applier has run against this target: it has no walapply.appliers table (walapply run creates it)")
	}
	// to_jsonb: the until columns came with migration 8, and a target
	// migrated by an older walapply has none.
	rows, err := conn.Query(ctx, `SELECT name, slot_name, publications, origin_name, source_system_id, source_timeline, created_at, updated_at,
			coalesce(to_jsonb(a)->>'until_lsn', ''), (to_jsonb(a)->>'until_reached_at')::timestamptz
		FROM walapply.appliers a ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("reading walapply.appliers on the target: %w", err)
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Registered, error) {
		var a Registered
		return a, r.Scan(&a.Name, &a.Slot, &a.Publications, &a.Origin, &a.SourceSystemID, &a.SourceTimeline, &a.CreatedAt, &a.UpdatedAt,
			&a.UntilLSN, &a.UntilReachedAt)
	})
	if err != nil {
		return nil, fmt.Errorf("reading walapply.appliers on the target: %w", err)
	}
	if name != "" {
		if all, err = pickRegistered(all, name); err != nil {
			return nil, err
		}
	}
	for i := range all {
		if err := readRegisteredCopy(ctx, conn, &all[i]); err != nil {
			return nil, err
		}
	}
	if all == nil {
		all = []Registered{}
	}
	return all, nil
}

// pickRegistered returns the applier named name, or an error listing those
// there are.
func pickRegistered(all []Registered, name string) ([]Registered, error) {
	names := make([]string, 0, len(all))
	for _, a := range all {
		if a.Name == name {
			return []Registered{a}, nil
		}
		names = append(names, strconv.Quote(a.Name))
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no applier %q on the target: walapply.appliers is empty", name)
	}
	return nil, fmt.Errorf("no applier %q on the target; it has %s", name, strings.Join(names, ", "))
}

// readRegisteredCopy reads a's initial copy and tables.
func readRegisteredCopy(ctx context.Context, conn *pgx.Conn, a *Registered) error {
	c := &RegisteredCopy{}
	err := conn.QueryRow(ctx, `SELECT c.started_at, c.finished_at,
			count(s.*)::int, count(s.*) FILTER (WHERE s.status = 'done')::int, COALESCE(sum(s.rows), 0)::bigint,
			count(s.*) FILTER (WHERE s.status = 'pending')::int
		FROM walapply.copies c LEFT JOIN walapply.copy_state s ON s.applier = c.applier AND s.status IN ('pending', 'done')
		WHERE c.applier = $1 GROUP BY c.started_at, c.finished_at`, a.Name).
		Scan(&c.StartedAt, &c.FinishedAt, &c.Tables, &c.TablesDone, &c.Rows, &c.Pending)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return fmt.Errorf("reading the initial copy's state on the target: %w", err)
	default:
		a.Copy = c
	}
	rows, err := conn.Query(ctx, `SELECT schema_name, table_name, status,
			published, coalesce(copy_lsn::text, ''), rows, finished_at, added_at
		FROM walapply.copy_state WHERE applier = $1 ORDER BY schema_name, table_name`, a.Name)
	if err != nil {
		return fmt.Errorf("reading the applier's tables in walapply.copy_state on the target: %w", err)
	}
	a.Tables, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (RegisteredTable, error) {
		var t RegisteredTable
		return t, r.Scan(&t.Schema, &t.Name, &t.State, &t.Published, &t.CopyLSN, &t.Rows, &t.CopiedAt, &t.AddedAt)
	})
	if err != nil {
		return fmt.Errorf("reading the applier's tables in walapply.copy_state on the target: %w", err)
	}
	return readRegisteredRanges(ctx, conn, a)
}

// readRegisteredRanges counts the ranges of a's tables copied in ranges
// (migration 9; a target migrated by an older walapply has none).
func readRegisteredRanges(ctx context.Context, conn *pgx.Conn, a *Registered) error {
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT pg_catalog.to_regclass('walapply.copy_ranges') IS NOT NULL").Scan(&exists); err != nil || !exists {
		return err
	}
	rows, err := conn.Query(ctx, `SELECT schema_name, table_name, count(*) FILTER (WHERE status = 'done'), count(*)
		FROM walapply.copy_ranges WHERE applier = $1 GROUP BY 1, 2`, a.Name)
	if err != nil {
		return fmt.Errorf("reading the applier's ranges in walapply.copy_ranges on the target: %w", err)
	}
	var schema, name string
	var done, total int
	_, err = pgx.ForEachRow(rows, []any{&schema, &name, &done, &total}, func() error {
		for i := range a.Tables {
			if t := &a.Tables[i]; t.Schema == schema && t.Name == name {
				t.RangesDone, t.RangesTotal = done, total
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading the applier's ranges in walapply.copy_ranges on the target: %w", err)
	}
	return nil
}
