package main

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/apply"
)

// tableProgress is a table being copied now.
type tableProgress struct {
	PID        int32   `json:"pid"` // the target backend running its COPY FROM
	Rows       int64   `json:"rows_so_far"`
	Bytes      int64   `json:"bytes_so_far"`
	Seconds    float64 `json:"seconds"` // since the copy's target transaction began
	RowsPerSec float64 `json:"rows_per_sec"`
	// EstimatedRows is the source's estimate of the table's rows
	// (pg_class.reltuples), with --source; ETASeconds the time left at the
	// rate so far.
	EstimatedRows *int64   `json:"estimated_rows,omitempty"`
	ETASeconds    *float64 `json:"eta_seconds,omitempty"`
}

// readCopyProgress fills in Copying of the applier's tables being copied.
//
// A table being copied is 'pending' in walapply.copy_state until its copy
// commits, with the copy's own rows: they are uncommitted, and status, a
// process of its own, cannot see them. The target's pg_stat_progress_copy
// (PostgreSQL 14+) can: tuples_processed and bytes_processed of the COPY
// FROM backend of each copy worker ("walapply <name> copy N"). It writes
// nothing, and needs no grant: PostgreSQL shows a role the progress of
// its own backends (status run as another role, without
// pg_read_all_stats, sees no progress, and says so).
func readCopyProgress(ctx context.Context, conn *pgx.Conn, a *applierStatus) error {
	var have bool
	if err := conn.QueryRow(ctx, `SELECT pg_catalog.to_regclass('pg_catalog.pg_stat_progress_copy') IS NOT NULL`).Scan(&have); err != nil || !have {
		return err // before PostgreSQL 14: no progress to show
	}
	rows, err := conn.Query(ctx, `SELECT n.nspname, c.relname, p.pid, p.tuples_processed, p.bytes_processed,
			COALESCE(EXTRACT(epoch FROM pg_catalog.clock_timestamp() - a.xact_start), 0)::float8
		FROM pg_catalog.pg_stat_progress_copy p
		JOIN pg_catalog.pg_stat_activity a ON a.pid = p.pid
		JOIN pg_catalog.pg_class c ON c.oid = p.relid
		JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE p.command = 'COPY FROM' AND pg_catalog.left(a.application_name, pg_catalog.length($1)) = $1`,
		"walapply "+a.Name+" copy ")
	if err != nil {
		return fmt.Errorf("reading the copy's progress in pg_stat_progress_copy on the target: %w", err)
	}
	byTable := map[[2]string]*tableProgress{}
	var schema, name string
	var p tableProgress
	_, err = pgx.ForEachRow(rows, []any{&schema, &name, &p.PID, &p.Rows, &p.Bytes, &p.Seconds}, func() error {
		q := p
		if q.Seconds > 0 {
			q.RowsPerSec = round1(float64(q.Rows) / q.Seconds)
		}
		q.Seconds = round1(q.Seconds)
		byTable[[2]string{schema, name}] = &q
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading the copy's progress in pg_stat_progress_copy on the target: %w", err)
	}
	for i := range a.Tables {
		t := &a.Tables[i]
		if t.State == "pending" {
			t.Copying = byTable[[2]string{t.Schema, t.Name}]
		}
	}
	if a.Copy != nil {
		a.Copy.Running = copying(*a) > 0 || copySessions(*a)
	}
	return nil
}

// readCopyEstimates adds the source's row estimates, and the ETA from
// them, to the tables being copied.
func readCopyEstimates(ctx context.Context, conn *pgx.Conn, a *applierStatus) error {
	for i := range a.Tables {
		p := a.Tables[i].Copying
		if p == nil {
			continue
		}
		var est *float64
		err := conn.QueryRow(ctx, `SELECT c.reltuples::float8 FROM pg_catalog.pg_class c
			JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2`,
			a.Tables[i].Schema, a.Tables[i].Name).Scan(&est)
		if err == pgx.ErrNoRows || est == nil || *est <= 0 {
			continue // never analyzed (-1 from PostgreSQL 14 on), or gone
		}
		if err != nil {
			return fmt.Errorf("reading the source's row estimate of %s: %w", quoteQualified(a.Tables[i].Schema, a.Tables[i].Name), err)
		}
		n := int64(*est)
		p.EstimatedRows = &n
		if p.RowsPerSec > 0 && n > p.Rows {
			eta := round1(float64(n-p.Rows) / p.RowsPerSec)
			p.ETASeconds = &eta
		}
	}
	return nil
}

// copyingText is the text of a table being copied.
func copyingText(p *tableProgress) string {
	s := fmt.Sprintf("COPYING: %d rows so far (%s), %.0f rows/s for %s", p.Rows, bytesText(p.Bytes), p.RowsPerSec,
		(time.Duration(p.Seconds * float64(time.Second))).Round(time.Second))
	if p.EstimatedRows != nil {
		s += fmt.Sprintf(", of about %d", *p.EstimatedRows)
	}
	if p.ETASeconds != nil {
		s += ", about " + (time.Duration(*p.ETASeconds * float64(time.Second))).Round(time.Second).String() + " left"
	}
	return s
}

// copying counts a's tables being copied now.
func copying(a applierStatus) int {
	n := 0
	for _, t := range a.Tables {
		if t.Copying != nil {
			n++
		}
	}
	return n
}

// copySessions reports whether a copy worker of a is connected to the
// target (its session "copy N").
func copySessions(a applierStatus) bool {
	for _, s := range a.Sessions {
		if strings.HasPrefix(s.Role, "copy ") {
			return true
		}
	}
	return false
}

func round1(x float64) float64 { return math.Round(x*10) / 10 }

// copyStatus is how far an applier's initial copy (walapply run --copy) got.
type copyStatus struct {
	Complete   bool       `json:"complete"`
	Running    bool       `json:"running"` // a table's copy is running now (tables[].copying)
	TablesDone int        `json:"tables_done"`
	Tables     int        `json:"tables"`
	Rows       int64      `json:"rows"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
}

// copyStatusOf is the initial copy the target records (nil: none).
func copyStatusOf(c *apply.RegisteredCopy) *copyStatus {
	if c == nil {
		return nil
	}
	// A table published later and not copied yet keeps it incomplete.
	return &copyStatus{Complete: c.FinishedAt != nil && c.Pending == 0, TablesDone: c.TablesDone, Tables: c.Tables, Rows: c.Rows,
		StartedAt: c.StartedAt, FinishedAt: c.FinishedAt}
}
