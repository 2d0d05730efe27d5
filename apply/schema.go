package apply

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/apply/internal/sqlgen"
)

// Schema phases (walapply.copies.schema_phase).
const (
	schemaPreData  = "pre-data"
	schemaPostData = "post-data"
)

// preData creates what plan holds on the target and records the phase,
// in one transaction.
//
// walapply run --copy --schema creates on the target what the published
// tables need, from the source's own pg_dump (schema_pgdump.go), in the
// two halves pg_dump splits a schema into:
//
//   - pre-data, before the slot and the copy: the tables' schemas (CREATE
//     SCHEMA IF NOT EXISTS: pg_dump -t leaves them out), the enum, domain,
//     composite and range types their columns use, the functions their
//     triggers call, the tables (with the partitions of a published root
//     and the root of a published partition, withRelatives) and the
//     sequences they own. It commits in
//     one target transaction together with walapply.copies.schema_phase
//     turning 'pre-data': a crash before leaves nothing, after it the next
//     start goes straight to the copy.
//   - post-data, once every table is copied and before streaming starts:
//     primary keys, unique and other indexes and constraints, then foreign
//     keys, triggers and the rest in pg_dump's order. The index builds
//     (INDEX and CONSTRAINT entries) run Config.IndexWorkers at a time on
//     connections of their own, each in its own transaction; the rest
//     follows on one connection, so a foreign key finds the key it
//     references. An entry that finds its object already there (from an
//     attempt that crashed after it committed) leaves it alone. The
//     column turns 'post-data' at the end.
//
// Streaming starts only after post-data: the apply path looks the target
// relations up (relcache.go) when the stream first names them, and the
// replica identity key it needs for UPDATE and DELETE is there by then.
//
// What already exists on the target is looked at first, and every
// conflict is reported before anything is created (SchemaConflictError):
// a published table that exists with other columns than the source's, or
// with rows; an enum with other labels; a sequence a new table would own;
// a trigger function with another body. An identical empty table, and a
// type or function with the same definition, are left alone.
func (c *copier) preData(ctx context.Context, plan *schemaPlan) error {
	cfg := c.cfg
	d, err := findPgDump(ctx, cfg, c.version)
	if err != nil {
		return err
	}
	var preamble string
	var entries []dumpEntry
	if len(plan.types)+len(plan.funcs) > 0 {
		var sel []string
		for _, s := range plan.schemas {
			sel = append(sel, "-n", dumpPattern(s))
		}
		script, err := d.dump(ctx, cfg, "pre-data", sel)
		if err != nil {
			return err
		}
		var all []dumpEntry
		preamble, all = parseDump(script)
		for _, e := range all {
			o := relName{e.schema, e.name}
			if (e.kind == "TYPE" || e.kind == "DOMAIN") && plan.types[o] || e.kind == "FUNCTION" && plan.funcs[o] {
				entries = append(entries, e)
			}
		}
	}
	if len(plan.tables) > 0 {
		var sel []string
		for _, t := range plan.tables {
			sel = append(sel, "-t", dumpPattern(t.schema, t.name))
		}
		script, err := d.dump(ctx, cfg, "pre-data", sel)
		if err != nil {
			return err
		}
		var all []dumpEntry
		preamble, all = parseDump(script)
		for _, e := range all {
			if e.kind != "SCHEMA" {
				entries = append(entries, e)
			}
		}
	}
	conn, err := connectTarget(ctx, cfg, "schema")
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := runPreamble(ctx, conn, preamble); err != nil {
		return err
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for _, s := range plan.schemas {
			if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+sqlgen.QuoteIdent(s)); err != nil {
				return fmt.Errorf("creating schema %s: %w", sqlgen.QuoteIdent(s), err)
			}
		}
		for _, e := range entries {
			if _, err := tx.Exec(ctx, e.sql); err != nil {
				return fmt.Errorf("creating %s %s.%s from pg_dump's pre-data: %w", strings.ToLower(e.kind), e.schema, e.name, err)
			}
		}
		_, err := tx.Exec(ctx, `INSERT INTO walapply.copies (applier, slot_name, schema_phase) VALUES ($1, $2, $3)
			ON CONFLICT (applier) DO UPDATE SET schema_phase = EXCLUDED.schema_phase`, cfg.Name, cfg.Slot, schemaPreData)
		return err
	})
	if err != nil {
		return &PermanentError{fmt.Errorf("--schema: %w (nothing of the pre-data section was kept)", err)}
	}
	c.rec.exists, c.rec.schemaPhase = true, schemaPreData
	cfg.Logger.Info().Int("tables", len(plan.tables)).Int("types", len(plan.types)).Int("functions", len(plan.funcs)).
		Int("entries", len(entries)).Msg("schema: pre-data created on the target")
	return nil
}

// runPreamble runs a pg_dump script's session settings one by one; a
// setting the target does not know (from a newer pg_dump) is skipped.
func runPreamble(ctx context.Context, conn *pgx.Conn, preamble string) error {
	for _, line := range strings.Split(preamble, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "--") {
			continue
		}
		if _, err := conn.Exec(ctx, line); err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == "42704" {
				continue
			}
			return fmt.Errorf("running pg_dump's session setting %q on the target: %w", line, err)
		}
	}
	return nil
}

// postData builds the indexes, constraints and triggers of the published
// tables once they are copied, and records the phase.
func (c *copier) postData(ctx context.Context, tables []*copyTable) error {
	cfg, began := c.cfg, time.Now()
	d, err := findPgDump(ctx, cfg, c.version)
	if err != nil {
		return err
	}
	if tables, err = withRelatives(ctx, c.src, tables); err != nil {
		return err
	}
	var sel []string
	for _, t := range tables {
		sel = append(sel, "-t", dumpPattern(t.schema, t.name))
	}
	script, err := d.dump(ctx, cfg, "post-data", sel)
	if err != nil {
		return err
	}
	preamble, entries := parseDump(script)
	var builds, rest []dumpEntry
	for _, e := range entries {
		if e.kind == "INDEX" || e.kind == "CONSTRAINT" {
			builds = append(builds, e)
		} else {
			rest = append(rest, e)
		}
	}
	workers := cfg.IndexWorkers
	if workers <= 0 {
		workers = 2
	}
	cfg.Logger.Info().Int("index_builds", len(builds)).Int("others", len(rest)).Int("workers", workers).
		Msg("schema: building the post-data section on the target")
	jobs := make(chan dumpEntry)
	errs := make(chan error, workers)
	ctx2, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for range min(workers, max(1, len(builds))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- c.runEntries(ctx2, preamble, jobs, cancel)
		}()
	}
feed:
	for _, e := range builds {
		select {
		case jobs <- e:
		case <-ctx2.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	close(errs)
	// The error that stopped the others, rather than their cancellation.
	var first error
	for err := range errs {
		if err != nil && (first == nil || errors.Is(first, context.Canceled)) {
			first = err
		}
	}
	if first != nil {
		return first
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	ordered := make(chan dumpEntry, len(rest))
	for _, e := range rest {
		ordered <- e
	}
	close(ordered)
	if err := c.runEntries(ctx, preamble, ordered, cancel); err != nil {
		return err
	}
	if _, err := c.control.Exec(ctx, `UPDATE walapply.copies SET schema_phase = $2 WHERE applier = $1`, cfg.Name, schemaPostData); err != nil {
		return fmt.Errorf("recording the post-data phase in walapply.copies on the target: %w", err)
	}
	c.rec.schemaPhase = schemaPostData
	cfg.Logger.Info().Int("entries", len(entries)).Float64("seconds", round1(time.Since(began).Seconds())).
		Msg("schema: post-data built on the target")
	return nil
}

// runEntries runs post-data entries on a connection of its own, each in
// its own transaction; one whose object exists already is left alone. On
// an error it cancels the others.
func (c *copier) runEntries(ctx context.Context, preamble string, jobs <-chan dumpEntry, cancel func()) error {
	conn, err := connectTarget(ctx, c.cfg, "schema")
	if err != nil {
		cancel()
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := runPreamble(ctx, conn, preamble); err != nil {
		cancel()
		return err
	}
	for e := range jobs {
		_, err := conn.Exec(ctx, e.sql)
		var pe *pgconn.PgError
		if errors.As(err, &pe) && (pe.Code == "42P07" || pe.Code == "42710" || pe.Code == "42P16") {
			c.cfg.Logger.Info().Str("object", e.schema+"."+e.name).Str("type", e.kind).Msg("schema: already on the target, left alone")
			continue
		}
		if err != nil {
			cancel()
			err = fmt.Errorf("--schema: creating %s %s.%s from pg_dump's post-data: %w", strings.ToLower(e.kind), e.schema, e.name, err)
			if pe != nil {
				err = &PermanentError{err}
			}
			return err
		}
	}
	return nil
}
