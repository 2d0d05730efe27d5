package engine

import (
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/apply/internal/pipeline"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/protocol"
)

// TestUncheckedRetry: a value error on a row's statement that no check
// has named yet makes Run retry once without grouping, also back to an
// earlier transaction than the last retry stopped at; a checked one, or
// another error, does not.
func TestUncheckedRetry(t *testing.T) {
	rel := &relmap.Entry{Rel: &protocol.Relation{Columns: []protocol.RelationColumn{{Name: "v"}}},
		Target: &relmap.Table{Columns: []relmap.Column{{Name: "v", TypeName: "character varying(3)"}}}, Tcol: []int{0}}
	tooLong := &pgconn.PgError{Severity: "ERROR", Code: "22001", Message: "value too long for type character varying(3)"}
	for _, c := range []struct {
		name string
		q    *pipeline.Stmt
		err  error
		want bool
	}{
		{"insert", &pipeline.Stmt{Op: pipeline.OpInsert, Rel: rel}, tooLong, true},
		{"copy", &pipeline.Stmt{Op: pipeline.OpCopy, Rel: rel}, tooLong, true},
		{"named, not checked", &pipeline.Stmt{Op: pipeline.OpUpdate, Rel: rel}, &columnError{columns: []string{`"v"`}, err: tooLong}, true},
		{"checked", &pipeline.Stmt{Op: pipeline.OpInsert, Rel: rel}, &columnError{columns: []string{`"v"`}, value: "a value of 4 characters", err: tooLong}, false},
		{"delete", &pipeline.Stmt{Op: pipeline.OpDelete, Rel: rel}, tooLong, false},
		{"not a value error", &pipeline.Stmt{Op: pipeline.OpInsert, Rel: rel}, &pgconn.PgError{Code: "23505"}, false},
		{"names its column", &pipeline.Stmt{Op: pipeline.OpInsert, Rel: rel}, &pgconn.PgError{Code: "22004", Message: `null value in column "v"`}, false},
		{"a domain's check", &pipeline.Stmt{Op: pipeline.OpInsert, Rel: rel}, &pgconn.PgError{Code: "23514", Message: `value for domain public.code violates check constraint "c"`}, true},
		{"a table's check", &pipeline.Stmt{Op: pipeline.OpInsert, Rel: rel}, &pgconn.PgError{Code: "23514", Message: `new row for relation "t" violates check constraint "c"`}, false},
		{"no relation", &pipeline.Stmt{Op: pipeline.OpInsert}, tooLong, false},
		{"no statement", nil, tooLong, false},
	} {
		if got := unchecked(c.q, c.err); got != c.want {
			t.Errorf("%s: unchecked = %v, want %v", c.name, got, c.want)
		}
	}
	ce := &columnError{columns: []string{`"v"`}, typ: "character varying(3)", value: "a value of 4 characters", err: tooLong}
	if got, want := ce.Error(), `column "v" (character varying(3) on the target), a value of 4 characters: ERROR: value too long for type character varying(3) (SQLSTATE 22001)`; got != want {
		t.Errorf("columnError:\n got %s\nwant %s", got, want)
	}
}
