package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// walapply run --copy --schema creates on the target what the published
// tables need, from the source's own pg_dump (schema_pgdump.go), in the
// two halves pg_dump splits a schema into:
//
//   - pre-data, before the slot and the copy: the tables' schemas (CREATE
//     SCHEMA IF NOT EXISTS: pg_dump -t leaves them out), the enum, domain,
//     composite and range types their columns use, the functions their
//     triggers call, the tables and the sequences they own. It commits in
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

// Schema phases (walapply.copies.schema_phase).
const (
	schemaPreData  = "pre-data"
	schemaPostData = "post-data"
)

// SchemaConflictError lists what on the target stands in the way of
// --schema. Nothing was created.
type SchemaConflictError struct {
	Conflicts []string
}

func (e *SchemaConflictError) Error() string {
	return "--schema: the target already has objects that differ from the source's, and nothing was changed; drop or rename them on the target, or create the schema yourself and run without --schema:\n  " +
		strings.Join(e.Conflicts, "\n  ")
}

// schemaPlan is what the pre-data section creates.
type schemaPlan struct {
	tables  []*copyTable     // published tables missing on the target
	types   map[relName]bool // types to create
	funcs   map[relName]bool // trigger functions to create (name as pg_dump's tag: "f()")
	schemas []string         // every schema those live in
}

const schemaColumnsSQL = `SELECT t.ord, a.attname, format_type(a.atttypid, a.atttypmod)
FROM unnest($1::text[], $2::text[]) WITH ORDINALITY t(s, n, ord)
JOIN pg_catalog.pg_namespace ns ON ns.nspname = t.s
JOIN pg_catalog.pg_class c ON c.relnamespace = ns.oid AND c.relname = t.n
JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY t.ord, a.attnum`

// schemaTypesSQL: the user-defined types the tables' columns use, through
// arrays and domains.
const schemaTypesSQL = `WITH RECURSIVE used(oid) AS (
  SELECT CASE WHEN ty.typelem <> 0 AND ty.typlen = -1 THEN ty.typelem ELSE ty.oid END
  FROM unnest($1::text[], $2::text[]) t(s, n)
  JOIN pg_catalog.pg_namespace ns ON ns.nspname = t.s
  JOIN pg_catalog.pg_class c ON c.relnamespace = ns.oid AND c.relname = t.n
  JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
  JOIN pg_catalog.pg_type ty ON ty.oid = a.atttypid
  UNION
  SELECT CASE WHEN b.typelem <> 0 AND b.typlen = -1 THEN b.typelem ELSE b.oid END
  FROM used u JOIN pg_catalog.pg_type ty ON ty.oid = u.oid JOIN pg_catalog.pg_type b ON b.oid = ty.typbasetype
  WHERE ty.typtype = 'd')
SELECT n.nspname, ty.typname
FROM used u JOIN pg_catalog.pg_type ty ON ty.oid = u.oid JOIN pg_catalog.pg_namespace n ON n.oid = ty.typnamespace
WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND (ty.typtype IN ('e', 'd', 'r') OR ty.typtype = 'c' AND (SELECT relkind FROM pg_catalog.pg_class WHERE oid = ty.typrelid) = 'c')
  AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d WHERE d.classid = 'pg_catalog.pg_type'::regclass AND d.objid = ty.oid AND d.deptype = 'e')`

// typeDefSQL describes a type for comparing both sides: its kind and an
// enum's labels.
const typeDefSQL = `SELECT ty.typtype::text || ':' || coalesce((SELECT string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder) FROM pg_catalog.pg_enum e WHERE e.enumtypid = ty.oid), '')
FROM pg_catalog.pg_type ty JOIN pg_catalog.pg_namespace n ON n.oid = ty.typnamespace WHERE n.nspname = $1 AND ty.typname = $2`

// schemaFuncsSQL: the functions the tables' triggers call.
const schemaFuncsSQL = `SELECT DISTINCT pn.nspname, p.proname || '(' || pg_catalog.pg_get_function_identity_arguments(p.oid) || ')'
FROM unnest($1::text[], $2::text[]) t(s, n)
JOIN pg_catalog.pg_namespace ns ON ns.nspname = t.s
JOIN pg_catalog.pg_class c ON c.relnamespace = ns.oid AND c.relname = t.n
JOIN pg_catalog.pg_trigger tg ON tg.tgrelid = c.oid AND NOT tg.tgisinternal
JOIN pg_catalog.pg_proc p ON p.oid = tg.tgfoid JOIN pg_catalog.pg_namespace pn ON pn.oid = p.pronamespace
WHERE pn.nspname NOT IN ('pg_catalog', 'information_schema')`

const funcDefSQL = `SELECT p.prosrc FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = $1 AND p.proname || '(' || pg_catalog.pg_get_function_identity_arguments(p.oid) || ')' = $2`

// schemaSeqsSQL: the sequences the tables own (serial and identity
// columns).
const schemaSeqsSQL = `SELECT sn.nspname, s.relname, ns.nspname, c.relname
FROM unnest($1::text[], $2::text[]) t(s, n)
JOIN pg_catalog.pg_namespace ns ON ns.nspname = t.s
JOIN pg_catalog.pg_class c ON c.relnamespace = ns.oid AND c.relname = t.n
JOIN pg_catalog.pg_depend d ON d.refclassid = 'pg_catalog.pg_class'::regclass AND d.refobjid = c.oid AND d.classid = 'pg_catalog.pg_class'::regclass AND d.deptype IN ('a', 'i')
JOIN pg_catalog.pg_class s ON s.oid = d.objid AND s.relkind = 'S'
JOIN pg_catalog.pg_namespace sn ON sn.oid = s.relnamespace`

const relExistsSQL = `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2)`

// planSchema compares the source's published tables and what they need
// with the target, and returns what pre-data creates, or every conflict.
func planSchema(ctx context.Context, src, tgt *pgx.Conn, tables []*copyTable) (*schemaPlan, error) {
	schemas, names := tableNames(tables)
	srcCols, err := columnLists(ctx, src, schemas, names)
	if err != nil {
		return nil, fmt.Errorf("reading the source catalog for --schema: %w", err)
	}
	tgtCols, err := columnLists(ctx, tgt, schemas, names)
	if err != nil {
		return nil, fmt.Errorf("reading the target catalog for --schema: %w", err)
	}
	plan := &schemaPlan{types: map[relName]bool{}, funcs: map[relName]bool{}}
	var conflicts []string
	for i, t := range tables {
		cols, found := tgtCols[i+1]
		switch {
		case !found:
			plan.tables = append(plan.tables, t)
		case !slices.Equal(cols, srcCols[i+1]):
			conflicts = append(conflicts, fmt.Sprintf("table %s exists on the target with other columns (%s) than on the source (%s)", t, strings.Join(cols, ", "), strings.Join(srcCols[i+1], ", ")))
		default:
			empty, err := targetEmpty(ctx, tgt, t)
			if err != nil {
				return nil, err
			}
			if !empty {
				conflicts = append(conflicts, fmt.Sprintf("table %s exists on the target and is not empty", t))
			}
		}
	}
	// Sequences owned by the tables to create must not exist yet.
	cs, cn := tableNames(plan.tables)
	err = eachRow(ctx, src, schemaSeqsSQL, []any{cs, cn}, func(r pgx.Rows) error {
		var seq, table relName
		if err := r.Scan(&seq.schema, &seq.name, &table.schema, &table.name); err != nil {
			return err
		}
		var exists bool
		if err := tgt.QueryRow(ctx, relExistsSQL, seq.schema, seq.name).Scan(&exists); err != nil {
			return err
		}
		if exists {
			conflicts = append(conflicts, fmt.Sprintf("relation %s, the sequence of table %s, already exists on the target", quoteQualified(seq.schema, seq.name), quoteQualified(table.schema, table.name)))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the owned sequences for --schema: %w", err)
	}
	// Types and trigger functions: created if missing, left alone if the
	// same.
	for _, k := range []struct {
		list, def, what string
		into            map[relName]bool
	}{{schemaTypesSQL, typeDefSQL, "type", plan.types}, {schemaFuncsSQL, funcDefSQL, "function", plan.funcs}} {
		var objs []relName
		err := eachRow(ctx, src, k.list, []any{schemas, names}, func(r pgx.Rows) error {
			var o relName
			objs = append(objs, o)
			return r.Scan(&objs[len(objs)-1].schema, &objs[len(objs)-1].name)
		})
		if err != nil {
			return nil, fmt.Errorf("reading the source catalog for --schema: %w", err)
		}
		for _, o := range objs {
			var sdef, tdef string
			if err := src.QueryRow(ctx, k.def, o.schema, o.name).Scan(&sdef); err != nil {
				return nil, fmt.Errorf("reading %s %s on the source: %w", k.what, o.name, err)
			}
			switch err := tgt.QueryRow(ctx, k.def, o.schema, o.name).Scan(&tdef); {
			case errors.Is(err, pgx.ErrNoRows):
				k.into[o] = true
			case err != nil:
				return nil, fmt.Errorf("reading %s %s on the target: %w", k.what, o.name, err)
			case tdef != sdef:
				conflicts = append(conflicts, fmt.Sprintf("%s %s.%s exists on the target with another definition than on the source", k.what, quoteIdent(o.schema), o.name))
			}
		}
	}
	if len(conflicts) > 0 {
		return nil, &PermanentError{&SchemaConflictError{Conflicts: conflicts}}
	}
	for _, t := range plan.tables {
		plan.schemas = append(plan.schemas, t.schema)
	}
	for _, m := range []map[relName]bool{plan.types, plan.funcs} {
		for o := range m {
			plan.schemas = append(plan.schemas, o.schema)
		}
	}
	slices.Sort(plan.schemas)
	plan.schemas = slices.Compact(plan.schemas)
	return plan, nil
}

func tableNames(tables []*copyTable) (schemas, names []string) {
	for _, t := range tables {
		schemas, names = append(schemas, t.schema), append(names, t.name)
	}
	return schemas, names
}

// columnLists returns each found table's columns as "name type", by its
// position (from 1) in the lists.
func columnLists(ctx context.Context, q querier, schemas, names []string) (map[int][]string, error) {
	out := map[int][]string{}
	err := eachRow(ctx, q, schemaColumnsSQL, []any{schemas, names}, func(r pgx.Rows) error {
		var ord int
		var col, typ string
		if err := r.Scan(&ord, &col, &typ); err != nil {
			return err
		}
		out[ord] = append(out[ord], quoteIdent(col)+" "+typ)
		return nil
	})
	return out, err
}

func eachRow(ctx context.Context, q querier, sql string, args []any, f func(pgx.Rows) error) error {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := f(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// preData creates what plan holds on the target and records the phase,
// in one transaction.
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
			if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+quoteIdent(s)); err != nil {
				return fmt.Errorf("creating schema %s: %w", quoteIdent(s), err)
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
	workers := max(1, cfg.IndexWorkers)
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
	for err := range errs {
		if err != nil {
			return err
		}
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

// checkSchema is the preflight's check of --schema: it needs --copy, a
// pg_dump at least as new as the source, and a target without conflicts
// (planSchema) when the pre-data section is still to be created.
func checkSchema(ctx context.Context, s *session, f *preflightFacts) ([]error, error) {
	cfg := s.cfg
	if !cfg.Schema {
		if !f.copyTodo {
			return nil, nil
		}
		// A copy begun with --schema has no keys on the target before
		// its post-data section: it must finish with --schema.
		rec, err := readCopyRecord(ctx, s.control, cfg.Name)
		if err != nil || rec.schemaPhase != schemaPreData {
			return nil, err
		}
		return []error{&PermanentError{fmt.Errorf("the unfinished initial copy of applier %q was started with --schema and its indexes and constraints are not built yet: run again with --copy --schema", cfg.Name)}}, nil
	}
	if !cfg.Copy {
		return []error{&PermanentError{errors.New("--schema creates the target tables for the initial copy and needs --copy")}}, nil
	}
	if !f.copyTodo {
		return nil, nil
	}
	if _, err := findPgDump(ctx, cfg, f.version); err != nil {
		return []error{err}, nil
	}
	rec, err := readCopyRecord(ctx, s.control, cfg.Name)
	if err != nil {
		return nil, err
	}
	if rec.schemaPhase != "" || f.copyResume {
		return nil, nil
	}
	f.schemaCreates = true
	src, err := connectSource(ctx, cfg, "check")
	if err != nil {
		return nil, err
	}
	defer src.Close(context.WithoutCancel(ctx))
	tables, err := listPublishedTables(ctx, src, cfg.Publications, f.version)
	if err != nil {
		return nil, err
	}
	_, err = planSchema(ctx, src, s.control, tables)
	var conflict *SchemaConflictError
	switch {
	case errors.As(err, &conflict):
		return []error{conflict}, nil
	case err != nil:
		return nil, err
	}
	return nil, nil
}
