package schema

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// fakeCatalog answers the plan's catalog queries (sql.go) from a model of
// one database, so that PlanFor's rules are tested without a server.
type fakeCatalog struct {
	columns   map[Object][]string // a table's columns, "name type"
	full      map[Object]bool     // tables holding rows
	relatives map[Object][]Object // a table's partitions and roots
	owned     map[Object][]Object // a table's sequences
	used      map[Object][]Object // the types a table's columns use
	triggers  map[Object][]Object // the functions a table's triggers call
	defs      map[Object]string   // a type's or function's definition
	seqs      map[Object]bool     // sequences
}

func (c *fakeCatalog) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	var out [][]any
	each := func(f func(t Object)) {
		schemas, names := args[0].([]string), args[1].([]string)
		for i := range schemas {
			f(Object{schemas[i], names[i]})
		}
	}
	switch {
	case sql == columnsSQL:
		ord := 0
		each(func(t Object) {
			ord++
			for _, col := range c.columns[t] {
				name, typ, _ := strings.Cut(col, " ")
				out = append(out, []any{ord, name, typ})
			}
		})
	case sql == relativesSQL:
		each(func(t Object) {
			for _, r := range c.relatives[t] {
				out = append(out, []any{r.Schema, r.Name})
			}
		})
	case sql == seqsSQL:
		each(func(t Object) {
			for _, s := range c.owned[t] {
				out = append(out, []any{s.Schema, s.Name, t.Schema, t.Name})
			}
		})
	case sql == typesSQL || sql == funcsSQL:
		m := c.used
		if sql == funcsSQL {
			m = c.triggers
		}
		each(func(t Object) {
			for _, o := range m[t] {
				out = append(out, []any{o.Schema, o.Name})
			}
		})
	case sql == relExistsSQL:
		o := Object{args[0].(string), args[1].(string)}
		_, isTable := c.columns[o]
		out = append(out, []any{isTable || c.seqs[o]})
	case sql == typeDefSQL || sql == funcDefSQL:
		if def, ok := c.defs[Object{args[0].(string), args[1].(string)}]; ok {
			out = append(out, []any{def})
		}
	case strings.HasPrefix(sql, "SELECT 1 FROM ONLY "):
		for t := range c.columns {
			if sql == "SELECT 1 FROM ONLY "+t.String()+" LIMIT 1" && c.full[t] {
				out = append(out, []any{1})
			}
		}
	default:
		return nil, fmt.Errorf("fakeCatalog: unexpected query %q", sql)
	}
	return &fakeRows{rows: out, at: -1}, nil
}

// fakeRows is a result of fakeCatalog's; the methods of pgx.Rows the
// plan does not call are left nil.
type fakeRows struct {
	pgx.Rows
	rows [][]any
	at   int
}

func (r *fakeRows) Close()     {}
func (r *fakeRows) Err() error { return nil }

func (r *fakeRows) Next() bool {
	r.at++
	return r.at < len(r.rows)
}

func (r *fakeRows) Scan(dest ...any) error {
	row := r.rows[r.at]
	if len(dest) != len(row) {
		return fmt.Errorf("fakeRows: %d destinations for %d values", len(dest), len(row))
	}
	for i, d := range dest {
		switch d := d.(type) {
		case *string:
			*d = row[i].(string)
		case *int:
			*d = row[i].(int)
		case *bool:
			*d = row[i].(bool)
		default:
			return fmt.Errorf("fakeRows: cannot scan into %T", d)
		}
	}
	return nil
}

// fakeConn records what Exec runs, failing the statements of fail with
// their server error; a statement of block waits until ctx is done and
// fails with its error, as a statement cancelled mid-way does.
type fakeConn struct {
	ran   []string
	fail  map[string]*pgconn.PgError
	block map[string]bool
}

func (c *fakeConn) Exec(ctx context.Context, sql string, _ ...any) (pgconn.CommandTag, error) {
	c.ran = append(c.ran, sql)
	if c.block[sql] {
		<-ctx.Done()
		return pgconn.CommandTag{}, ctx.Err()
	}
	if pe := c.fail[sql]; pe != nil {
		return pgconn.CommandTag{}, pe
	}
	return pgconn.CommandTag{}, nil
}
