package schema

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/apply/internal/sqlgen"
)

// Querier is the part of *pgx.Conn the catalog reads need.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Object is a table, type or function by schema and name (a function's
// name as pg_dump's tag has it: "f(integer)").
type Object struct{ Schema, Name string }

// String is the object's quoted, schema-qualified name.
func (o Object) String() string { return sqlgen.QuoteQualified(o.Schema, o.Name) }

// Plan is what the pre-data section creates on the target, or what stands
// in its way.
//
// What already exists on the target is looked at first, and every conflict
// is reported before anything is created: a published table that exists
// with other columns than the source's, or with rows; an enum with other
// labels; a sequence a new table would own; a trigger function with
// another body. An identical empty table, and a type or function with the
// same definition, are left alone.
type Plan struct {
	Tables  []Object        // published tables (and their relatives) missing on the target
	Types   map[Object]bool // types to create
	Funcs   map[Object]bool // trigger functions to create
	Schemas []string        // every schema those live in, sorted, once each
	// Conflicts, when there are any, say what on the target is in the way;
	// then nothing is to be created and the fields above are not filled.
	Conflicts []string
}

// PlanFor compares the source's published tables (with their relatives,
// WithRelatives) and what they need with the target, and returns the plan.
// Its error is a failed read, never a conflict.
func PlanFor(ctx context.Context, src, tgt Querier, tables []Object) (*Plan, error) {
	tables, err := WithRelatives(ctx, src, tables)
	if err != nil {
		return nil, err
	}
	schemas, names := split(tables)
	srcCols, err := columnLists(ctx, src, schemas, names)
	if err != nil {
		return nil, fmt.Errorf("reading the source catalog for --schema: %w", err)
	}
	tgtCols, err := columnLists(ctx, tgt, schemas, names)
	if err != nil {
		return nil, fmt.Errorf("reading the target catalog for --schema: %w", err)
	}
	plan := &Plan{Types: map[Object]bool{}, Funcs: map[Object]bool{}}
	var conflicts []string
	for i, t := range tables {
		cols, found := tgtCols[i+1]
		switch {
		case !found:
			plan.Tables = append(plan.Tables, t)
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
	cs, cn := split(plan.Tables)
	err = eachRow(ctx, src, seqsSQL, []any{cs, cn}, func(r pgx.Rows) error {
		var seq, table Object
		if err := r.Scan(&seq.Schema, &seq.Name, &table.Schema, &table.Name); err != nil {
			return err
		}
		var exists bool
		if err := scanRow(ctx, tgt, relExistsSQL, []any{seq.Schema, seq.Name}, &exists); err != nil {
			return err
		}
		if exists {
			conflicts = append(conflicts, fmt.Sprintf("relation %s, the sequence of table %s, already exists on the target", seq, table))
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
		into            map[Object]bool
	}{{typesSQL, typeDefSQL, "type", plan.Types}, {funcsSQL, funcDefSQL, "function", plan.Funcs}} {
		var objs []Object
		err := eachRow(ctx, src, k.list, []any{schemas, names}, func(r pgx.Rows) error {
			var o Object
			objs = append(objs, o)
			return r.Scan(&objs[len(objs)-1].Schema, &objs[len(objs)-1].Name)
		})
		if err != nil {
			return nil, fmt.Errorf("reading the source catalog for --schema: %w", err)
		}
		for _, o := range objs {
			var sdef, tdef string
			if err := scanRow(ctx, src, k.def, []any{o.Schema, o.Name}, &sdef); err != nil {
				return nil, fmt.Errorf("reading %s %s on the source: %w", k.what, o.Name, err)
			}
			switch err := scanRow(ctx, tgt, k.def, []any{o.Schema, o.Name}, &tdef); {
			case errors.Is(err, pgx.ErrNoRows):
				k.into[o] = true
			case err != nil:
				return nil, fmt.Errorf("reading %s %s on the target: %w", k.what, o.Name, err)
			case tdef != sdef:
				conflicts = append(conflicts, fmt.Sprintf("%s %s.%s exists on the target with another definition than on the source", k.what, sqlgen.QuoteIdent(o.Schema), o.Name))
			}
		}
	}
	if len(conflicts) > 0 {
		return &Plan{Conflicts: conflicts}, nil
	}
	for _, t := range plan.Tables {
		plan.Schemas = append(plan.Schemas, t.Schema)
	}
	for _, m := range []map[Object]bool{plan.Types, plan.Funcs} {
		for o := range m {
			plan.Schemas = append(plan.Schemas, o.Schema)
		}
	}
	slices.Sort(plan.Schemas)
	plan.Schemas = slices.Compact(plan.Schemas)
	return plan, nil
}

// WithRelatives returns tables and their partitioned ancestors and
// partitions (relativesSQL), which pg_dump -t leaves out but a partition
// or a root needs.
func WithRelatives(ctx context.Context, src Querier, tables []Object) ([]Object, error) {
	schemas, names := split(tables)
	out := slices.Clone(tables)
	err := eachRow(ctx, src, relativesSQL, []any{schemas, names}, func(r pgx.Rows) error {
		var o Object
		if err := r.Scan(&o.Schema, &o.Name); err != nil {
			return err
		}
		out = append(out, o)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the partitions of the published tables on the source: %w", err)
	}
	return out, nil
}

// split returns the objects' schemas and names as two parallel lists, the
// catalog queries' parameters.
func split(objs []Object) (schemas, names []string) {
	for _, o := range objs {
		schemas, names = append(schemas, o.Schema), append(names, o.Name)
	}
	return schemas, names
}

// targetEmpty reports whether table t holds no rows of its own (ONLY: a
// partition is a table of the plan by itself).
func targetEmpty(ctx context.Context, q Querier, t Object) (bool, error) {
	rows, err := q.Query(ctx, "SELECT 1 FROM ONLY "+t.String()+" LIMIT 1")
	if err != nil {
		return false, fmt.Errorf("checking that target table %s is empty: %w", t, err)
	}
	defer rows.Close()
	empty := !rows.Next()
	return empty, rows.Err()
}

// columnLists returns each found table's columns as "name type", by its
// position (from 1) in the lists.
func columnLists(ctx context.Context, q Querier, schemas, names []string) (map[int][]string, error) {
	out := map[int][]string{}
	err := eachRow(ctx, q, columnsSQL, []any{schemas, names}, func(r pgx.Rows) error {
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

func eachRow(ctx context.Context, q Querier, sql string, args []any, f func(pgx.Rows) error) error {
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

// scanRow scans the first row of sql's result into dest, or returns
// pgx.ErrNoRows when there is none: pgx's QueryRow, through Querier.
func scanRow(ctx context.Context, q Querier, sql string, args []any, dest ...any) error {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}
