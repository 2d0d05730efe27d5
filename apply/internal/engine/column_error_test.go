package engine

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/apply/internal/pipeline"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/protocol"
)

// TestWithColumn: a value error from the target that names a type gets the
// column(s) of that type; anything else passes unchanged.
func TestWithColumn(t *testing.T) {
	rel := &relmap.Entry{
		Rel: &protocol.Relation{Columns: []protocol.RelationColumn{{Name: "id"}, {Name: "Code"}, {Name: "b"}, {Name: "gen"}, {Name: "amount"}, {Name: "n"}}},
		Target: &relmap.Table{Columns: []relmap.Column{
			{Name: "id", TypeName: "integer"},
			{Name: "Code", TypeName: "character varying(3)"},
			{Name: "b", TypeName: "character varying(3)"},
			{Name: "gen", TypeName: "character varying(3)"},
			{Name: "amount", TypeName: "numeric(5,2)"},
			{Name: "n", TypeName: "integer"},
		}},
		Tcol: []int{0, 1, 2, -1, 4, 5}, // gen is generated on the target: never written
	}
	rel.NoteParams("INSERT ...", []string{"id", "Code", "b", "amount", "n"})
	q := &pipeline.Stmt{Op: pipeline.OpInsert, Rel: rel, SQL: "INSERT ..."}
	param := func(code, msg, where string) error {
		return &pgconn.PgError{Severity: "ERROR", Code: code, Message: msg, Where: where}
	}
	pg := func(code, msg, detail string) error {
		return &pgconn.PgError{Severity: "ERROR", Code: code, Message: msg, Detail: detail}
	}
	for _, c := range []struct {
		name string
		q    *pipeline.Stmt
		err  error
		want string // "" means unchanged
	}{
		{"too long, two candidates", q, pg("22001", "value too long for type character varying(3)", ""),
			`one of columns "Code", "b" (character varying(3) on the target): ERROR: value too long for type character varying(3) (SQLSTATE 22001)`},
		{"invalid input", q, pg("22P02", `invalid input syntax for type integer: "x"`, ""),
			`one of columns "id", "n" (integer on the target): ERROR: invalid input syntax for type integer: "x" (SQLSTATE 22P02)`},
		{"invalid input, the parameter named", q, param("22P02", `invalid input syntax for type integer: "x"`, "unnamed portal parameter $5 = '...'"),
			`column "n" (integer on the target): ERROR: invalid input syntax for type integer: "x" (SQLSTATE 22P02)`},
		{"invalid input, a named portal's parameter", q, param("22P02", `invalid input syntax for type integer: "x"`, `portal "p" parameter $1`),
			`column "id" (integer on the target): ERROR: invalid input syntax for type integer: "x" (SQLSTATE 22P02)`},
		{"a parameter past the columns (a conflict wrapper's)", q, param("22P02", `invalid input syntax for type integer: "x"`, "unnamed portal parameter $6"),
			`one of columns "id", "n" (integer on the target): ERROR: invalid input syntax for type integer: "x" (SQLSTATE 22P02)`},
		{"another statement's parameter", &pipeline.Stmt{Op: pipeline.OpInsert, Rel: rel, SQL: "UPDATE ..."}, param("22P02", `invalid input syntax for type integer: "x"`, "unnamed portal parameter $5"),
			`one of columns "id", "n" (integer on the target): ERROR: invalid input syntax for type integer: "x" (SQLSTATE 22P02)`},
		{"COPY names the column", &pipeline.Stmt{Op: pipeline.OpCopy, Rel: rel}, param("22P02", `invalid input syntax for type integer: "x"`, `COPY t, line 50, column n: "x"`),
			`column "n" (integer on the target): ERROR: invalid input syntax for type integer: "x" (SQLSTATE 22P02)`},
		{"numeric overflow", q, pg("22003", "numeric field overflow", "A field with precision 5, scale 2 must round to an absolute value less than 10^3."),
			`column "amount" (numeric(5,2) on the target): ERROR: numeric field overflow (SQLSTATE 22003)`},
		{"wrapped", q, fmt.Errorf("sending: %w", pg("22001", "value too long for type character varying(3)", "")),
			`one of columns "Code", "b" (character varying(3) on the target): sending: ERROR: value too long for type character varying(3) (SQLSTATE 22001)`},
		{"no such type", q, pg("22001", "value too long for type character(9)", ""), ""},
		{"names its column already", q, pg("22004", `null value in column "x" violates ...`, ""), ""},
		{"not a value error", q, pg("23505", "duplicate key value violates unique constraint", ""), ""},
		{"not a server error", q, errors.New("value too long for type character varying(3)"), ""},
		{"no statement", nil, pg("22001", "value too long for type character varying(3)", ""), ""},
		{"no relation", &pipeline.Stmt{Op: pipeline.OpCommit}, pg("22001", "value too long for type character varying(3)", ""), ""},
		{"unmapped relation", &pipeline.Stmt{Op: pipeline.OpInsert, Rel: &relmap.Entry{Rel: rel.Rel}}, pg("22001", "value too long for type character varying(3)", ""), ""},
	} {
		got := withColumn(c.q, c.err)
		if c.want == "" {
			if got != c.err {
				t.Errorf("%s: changed to %v", c.name, got)
			}
			continue
		}
		if got.Error() != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
		var pgErr *pgconn.PgError
		if !errors.As(got, &pgErr) || hintFor(got) == "" {
			t.Errorf("%s: the server error (and its hint) is no longer reachable", c.name)
		}
	}
}
