package apply

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/walapply/walapply/apply/internal/initcopy"
	"github.com/walapply/walapply/apply/internal/schema"
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

// schemaPlan is what the pre-data section creates (schema.Plan), with the
// tables to create as the copy names them.
type schemaPlan struct {
	*schema.Plan
	tables []*initcopy.Table // published tables (and their relatives) missing on the target
}

// planSchema is schema.PlanFor for the copy's tables: the plan, or every
// conflict as a permanent SchemaConflictError.
func planSchema(ctx context.Context, src, tgt schema.Querier, tables []*initcopy.Table) (*schemaPlan, error) {
	p, err := schema.PlanFor(ctx, src, tgt, schemaObjects(tables))
	if err != nil {
		return nil, err
	}
	if len(p.Conflicts) > 0 {
		return nil, &PermanentError{Err: &SchemaConflictError{Conflicts: p.Conflicts}}
	}
	plan := &schemaPlan{Plan: p}
	for _, o := range p.Tables {
		plan.tables = append(plan.tables, &initcopy.Table{Rel: initcopy.Rel{Schema: o.Schema, Name: o.Name}})
	}
	return plan, nil
}

// schemaObjects names the copy's tables as internal/schema does.
func schemaObjects(tables []*initcopy.Table) []schema.Object {
	objs := make([]schema.Object, len(tables))
	for i, t := range tables {
		objs[i] = schema.Object{Schema: t.Schema, Name: t.Name}
	}
	return objs
}

// findPgDump is schema.Find with Config.PgDump; retrying cannot fix its
// errors.
func findPgDump(ctx context.Context, cfg *Config, version int) (schema.PgDump, error) {
	d, err := schema.Find(ctx, cfg.PgDump, version)
	if err != nil {
		return d, &PermanentError{Err: err}
	}
	return d, nil
}

// dumpSection runs d for one section of the source's schema (schema.Dump):
// a connection string that does not parse is a configuration error, a
// pg_dump that refuses the source a permanent one.
func dumpSection(ctx context.Context, d schema.PgDump, cfg *Config, section string, selection []string) (string, error) {
	script, err := d.Dump(ctx, cfg.Source, "walapply "+cfg.Name+" schema", section, selection)
	var tool *schema.ToolError
	switch {
	case errors.Is(err, schema.ErrConnString):
		return "", fmt.Errorf("%w: %v", ErrConfig, err)
	case errors.As(err, &tool):
		return "", &PermanentError{Err: err}
	}
	return script, err
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
		rec, err := initcopy.ReadRecord(ctx, s.control, cfg.Name)
		if err != nil || rec.SchemaPhase != schemaPreData {
			return nil, err
		}
		return []error{&PermanentError{Err: fmt.Errorf("the unfinished initial copy of applier %q was started with --schema and its indexes and constraints are not built yet: run again with --copy --schema", cfg.Name)}}, nil
	}
	if !cfg.Copy {
		return []error{&PermanentError{Err: errors.New("--schema creates the target tables for the initial copy and needs --copy")}}, nil
	}
	if !f.copyTodo {
		return nil, nil
	}
	if _, err := findPgDump(ctx, cfg, f.version); err != nil {
		return []error{err}, nil
	}
	rec, err := initcopy.ReadRecord(ctx, s.control, cfg.Name)
	if err != nil {
		return nil, err
	}
	if rec.SchemaPhase != "" || f.copyResume {
		return nil, nil
	}
	f.schemaCreates = true
	src, release, err := s.sourceSQL(ctx, "check")
	if err != nil {
		return nil, err
	}
	defer release()
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
