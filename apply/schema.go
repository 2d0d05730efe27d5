package apply

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/apply/internal/initcopy"
	"github.com/walapply/walapply/apply/internal/schema"
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
// tables need, from the source's own pg_dump (internal/schema), in the
// two halves pg_dump splits a schema into:
//
//   - pre-data, before the slot and the copy: the tables' schemas (CREATE
//     SCHEMA IF NOT EXISTS: pg_dump -t leaves them out), the enum, domain,
//     composite and range types their columns use, the functions their
//     triggers call, the tables (with the partitions of a published root
//     and the root of a published partition, schema.WithRelatives) and the
//     sequences they own. It commits in
//     one target transaction together with walapply.copies.schema_phase
//     turning 'pre-data': a crash before leaves nothing, after it the next
//     start goes straight to the copy.
//   - post-data, dumped before the copy and built before streaming
//     starts: primary keys, unique and other indexes and constraints, then
//     foreign keys, triggers and the rest in pg_dump's order. A table's
//     index builds begin as soon as its copy commits, while other tables
//     are still copied (schema.EarlyBuilds); what remains runs once every
//     table is copied (schema.BuildPostData). Both run Config.IndexWorkers
//     builds at a time and leave an object already there alone. The column
//     turns 'post-data' at the end.
//
// Streaming starts only after post-data: the apply path looks the target
// relations up (internal/engine/relcache.go) when the stream first names them, and the
// replica identity key it needs for UPDATE and DELETE is there by then.
//
// What already exists on the target is looked at first (schema.Plan), and
// every conflict is reported before anything is created
// (SchemaConflictError).
func (c *copier) preData(ctx context.Context, plan *schemaPlan) error {
	cfg := c.cfg
	d, err := findPgDump(ctx, cfg, c.version)
	if err != nil {
		return err
	}
	var preamble string
	var entries []schema.Entry
	if len(plan.Types)+len(plan.Funcs) > 0 {
		var sel []string
		for _, s := range plan.Schemas {
			sel = append(sel, "-n", schema.Pattern(s))
		}
		script, err := dumpSection(ctx, d, cfg, "pre-data", sel)
		if err != nil {
			return err
		}
		var all []schema.Entry
		preamble, all = schema.Parse(script)
		for _, e := range all {
			o := schema.Object{Schema: e.Schema, Name: e.Name}
			if (e.Kind == "TYPE" || e.Kind == "DOMAIN") && plan.Types[o] || e.Kind == "FUNCTION" && plan.Funcs[o] {
				entries = append(entries, e)
			}
		}
	}
	if len(plan.Tables) > 0 {
		var sel []string
		for _, t := range plan.Tables {
			sel = append(sel, "-t", schema.Pattern(t.Schema, t.Name))
		}
		script, err := dumpSection(ctx, d, cfg, "pre-data", sel)
		if err != nil {
			return err
		}
		var all []schema.Entry
		preamble, all = schema.Parse(script)
		for _, e := range all {
			if e.Kind != "SCHEMA" {
				entries = append(entries, e)
			}
		}
	}
	conn, err := connectTarget(ctx, cfg, "schema")
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := schema.RunPreamble(ctx, conn, preamble); err != nil {
		return err
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for _, s := range plan.Schemas {
			if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+sqlgen.QuoteIdent(s)); err != nil {
				return fmt.Errorf("creating schema %s: %w", sqlgen.QuoteIdent(s), err)
			}
		}
		for _, e := range entries {
			if _, err := tx.Exec(ctx, e.SQL); err != nil {
				return fmt.Errorf("creating %s %s.%s from pg_dump's pre-data: %w", strings.ToLower(e.Kind), e.Schema, e.Name, err)
			}
		}
		_, err := tx.Exec(ctx, `INSERT INTO walapply.copies (applier, slot_name, schema_phase) VALUES ($1, $2, $3)
			ON CONFLICT (applier) DO UPDATE SET schema_phase = EXCLUDED.schema_phase`, cfg.Name, cfg.Slot, schemaPreData)
		return err
	})
	if err != nil {
		return &PermanentError{Err: fmt.Errorf("--schema: %w (nothing of the pre-data section was kept)", err)}
	}
	c.rec.Exists, c.rec.SchemaPhase = true, schemaPreData
	cfg.Logger.Info().Int("tables", len(plan.Tables)).Int("types", len(plan.Types)).Int("functions", len(plan.Funcs)).
		Int("entries", len(entries)).Msg("schema: pre-data created on the target")
	return nil
}

// postDataRun is the post-data section of one copy: dumped before the
// copy starts, its index builds begun table by table as the tables are
// copied (schema.EarlyBuilds), the rest built once every table is.
type postDataRun struct {
	preamble string
	entries  []schema.Entry
	early    *schema.EarlyBuilds
	began    time.Time
}

// startPostData dumps the post-data section of the published tables and
// gets its early builds ready; fail hears of the first that fails.
func (c *copier) startPostData(ctx context.Context, tables []*initcopy.Table, fail func(error)) (*postDataRun, error) {
	cfg := c.cfg
	d, err := findPgDump(ctx, cfg, c.version)
	if err != nil {
		return nil, err
	}
	objs, err := schema.WithRelatives(ctx, c.src, schemaObjects(tables))
	if err != nil {
		return nil, err
	}
	var sel []string
	for _, t := range objs {
		sel = append(sel, "-t", schema.Pattern(t.Schema, t.Name))
	}
	script, err := dumpSection(ctx, d, cfg, "post-data", sel)
	if err != nil {
		return nil, err
	}
	r := &postDataRun{began: time.Now()}
	r.preamble, r.entries = schema.Parse(script)
	r.early = schema.StartEarlyBuilds(ctx, r.preamble, r.entries, c.indexWorkers(), c.schemaConnect(), fail, cfg.Logger)
	return r, nil
}

// postDataError is err, permanent when the server refused a post-data
// entry: running it again cannot help.
func postDataError(err error) error {
	var entry *schema.EntryError
	var pe *pgconn.PgError
	if errors.As(err, &entry) && errors.As(entry.Err, &pe) {
		return &PermanentError{Err: err}
	}
	return err
}

// tableCopied starts t's index builds, if the post-data section is due.
func (c *copier) tableCopied(t *initcopy.Table) {
	if c.post != nil {
		c.post.early.Copied(schema.Object{Schema: t.Schema, Name: t.Name})
	}
}

func (c *copier) indexWorkers() int {
	if c.cfg.IndexWorkers > 0 {
		return c.cfg.IndexWorkers
	}
	return 2
}

// schemaConnect opens the post-data section's connections to the target.
func (c *copier) schemaConnect() schema.Connect {
	cfg := c.cfg
	return func(ctx context.Context) (schema.Execer, func(), error) {
		conn, err := connectTarget(ctx, cfg, "schema")
		if err != nil {
			return nil, nil, err
		}
		if err := raiseIndexMemory(ctx, conn, cfg.IndexMemory); err != nil { // schema_memory.go
			conn.Close(context.WithoutCancel(ctx))
			return nil, nil, err
		}
		return conn, func() { conn.Close(context.WithoutCancel(ctx)) }, nil
	}
}

// postData builds what remains of the post-data section once every table
// is copied (the early builds done, schema.EarlyBuilds), and records the
// phase.
func (c *copier) postData(ctx context.Context, r *postDataRun) error {
	cfg := c.cfg
	rest, err := r.early.Finish()
	if err == nil {
		err = schema.BuildPostData(ctx, r.preamble, rest, c.indexWorkers(), c.schemaConnect(), cfg.Logger)
	}
	if err != nil {
		return postDataError(err)
	}
	if _, err := c.control.Exec(ctx, `UPDATE walapply.copies SET schema_phase = $2 WHERE applier = $1`, cfg.Name, schemaPostData); err != nil {
		return fmt.Errorf("recording the post-data phase in walapply.copies on the target: %w", err)
	}
	c.rec.SchemaPhase = schemaPostData
	cfg.Logger.Info().Int("entries", len(r.entries)).Int("built_early", len(r.entries)-len(rest)).
		Float64("seconds", initcopy.Round1(time.Since(r.began).Seconds())).Msg("schema: post-data built on the target")
	return nil
}
