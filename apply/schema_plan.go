package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/apply/internal/sqlgen"
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
//
// What --schema finds on the target before creating anything (schema.go):
// the plan of what the pre-data section creates, or every conflict.
func planSchema(ctx context.Context, src, tgt *pgx.Conn, tables []*copyTable) (*schemaPlan, error) {
	tables, err := withRelatives(ctx, src, tables)
	if err != nil {
		return nil, err
	}
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
			conflicts = append(conflicts, fmt.Sprintf("relation %s, the sequence of table %s, already exists on the target", sqlgen.QuoteQualified(seq.schema, seq.name), sqlgen.QuoteQualified(table.schema, table.name)))
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
				conflicts = append(conflicts, fmt.Sprintf("%s %s.%s exists on the target with another definition than on the source", k.what, sqlgen.QuoteIdent(o.schema), o.name))
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

// schemaRelativesSQL: the partitioned tables above the published tables
// and the partitions below them, which pg_dump -t leaves out but a
// partition or a root needs.
const schemaRelativesSQL = `WITH RECURSIVE pub AS (
  SELECT c.oid FROM unnest($1::text[], $2::text[]) t(s, n)
  JOIN pg_catalog.pg_namespace ns ON ns.nspname = t.s
  JOIN pg_catalog.pg_class c ON c.relnamespace = ns.oid AND c.relname = t.n),
up(oid) AS (SELECT inhparent FROM pg_catalog.pg_inherits WHERE inhrelid IN (SELECT oid FROM pub)
  UNION SELECT i.inhparent FROM pg_catalog.pg_inherits i JOIN up ON i.inhrelid = up.oid),
down(oid) AS (SELECT inhrelid FROM pg_catalog.pg_inherits WHERE inhparent IN (SELECT oid FROM pub)
  UNION SELECT i.inhrelid FROM pg_catalog.pg_inherits i JOIN down ON i.inhparent = down.oid)
SELECT n.nspname, c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.oid IN (SELECT oid FROM up UNION SELECT oid FROM down) AND c.oid NOT IN (SELECT oid FROM pub) AND c.relkind IN ('r', 'p')
ORDER BY 1, 2`

// withRelatives returns tables and their partitioned ancestors and
// partitions (schemaRelativesSQL).
func withRelatives(ctx context.Context, src *pgx.Conn, tables []*copyTable) ([]*copyTable, error) {
	schemas, names := tableNames(tables)
	out := slices.Clone(tables)
	err := eachRow(ctx, src, schemaRelativesSQL, []any{schemas, names}, func(r pgx.Rows) error {
		t := &copyTable{}
		out = append(out, t)
		return r.Scan(&t.schema, &t.name)
	})
	if err != nil {
		return nil, fmt.Errorf("reading the partitions of the published tables on the source: %w", err)
	}
	return out, nil
}

func tableNames(tables []*copyTable) (schemas, names []string) {
	for _, t := range tables {
		schemas, names = append(schemas, t.schema), append(names, t.name)
	}
	return schemas, names
}

// columnLists returns each found table's columns as "name type", by its
// position (from 1) in the lists.
func columnLists(ctx context.Context, q relmap.Querier, schemas, names []string) (map[int][]string, error) {
	out := map[int][]string{}
	err := eachRow(ctx, q, schemaColumnsSQL, []any{schemas, names}, func(r pgx.Rows) error {
		var ord int
		var col, typ string
		if err := r.Scan(&ord, &col, &typ); err != nil {
			return err
		}
		out[ord] = append(out[ord], sqlgen.QuoteIdent(col)+" "+typ)
		return nil
	})
	return out, err
}

func eachRow(ctx context.Context, q relmap.Querier, sql string, args []any, f func(pgx.Rows) error) error {
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
