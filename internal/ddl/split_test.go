package ddl

import (
	"slices"
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	for _, c := range []struct {
		q    string
		want []string
	}{
		{"ALTER TABLE t ADD c int", []string{"ALTER TABLE t ADD c int"}},
		{"ALTER TABLE t ADD c int;", []string{"ALTER TABLE t ADD c int"}},
		{"SET x = 1; ALTER TABLE t ADD c int ;\n", []string{"SET x = 1", "ALTER TABLE t ADD c int"}},
		{`ALTER TABLE "a;b" ADD c text DEFAULT 'x;y'`, []string{`ALTER TABLE "a;b" ADD c text DEFAULT 'x;y'`}},
		{`COMMENT ON TABLE t IS E'it\'s; ok'; SELECT 1`, []string{`COMMENT ON TABLE t IS E'it\'s; ok'`, "SELECT 1"}},
		{"CREATE FUNCTION f() RETURNS int AS $b$ SELECT 1; $b$ LANGUAGE sql; SELECT 2", []string{"CREATE FUNCTION f() RETURNS int AS $b$ SELECT 1; $b$ LANGUAGE sql", "SELECT 2"}},
		{"-- a; comment\nDROP TABLE t /* x; /* nested; */ y */; ", []string{"-- a; comment\nDROP TABLE t /* x; /* nested; */ y */"}},
		{"CREATE PROCEDURE p() BEGIN ATOMIC INSERT INTO t VALUES (1); SELECT CASE WHEN true THEN 1 END; END; CALL p()",
			[]string{"CREATE PROCEDURE p() BEGIN ATOMIC INSERT INTO t VALUES (1); SELECT CASE WHEN true THEN 1 END; END", "CALL p()"}},
		{";; -- only\n", nil},
	} {
		if got := Split(c.q); !slices.Equal(got, c.want) {
			t.Errorf("Split(%q) = %q, want %q", c.q, got, c.want)
		}
	}
}

func TestStatement(t *testing.T) {
	for _, c := range []struct {
		q    string
		seq  int
		want string
		ok   bool
	}{
		{"ALTER TABLE t ADD c int", 1, "ALTER TABLE t ADD c int", true},
		{"SET search_path = s; ALTER TABLE t ADD c int; COMMIT", 1, "ALTER TABLE t ADD c int", true},
		{"INSERT INTO t VALUES (1); ALTER TABLE t ADD c int", 1, "ALTER TABLE t ADD c int", true},
		{"ALTER TABLE t ADD c int; ALTER TABLE t ADD d int", 1, "", false}, // several
		{"ALTER TABLE t ADD c int; ALTER TABLE t ADD d int", 2, "", false},
		{"DO $$BEGIN EXECUTE 'ALTER TABLE t ADD c int'; END$$", 1, "", false}, // inside a DO block
		{"SELECT add_column()", 1, "", false},                                 // inside a function
		{"/* why */ CREATE INDEX i ON t (a)", 1, "/* why */ CREATE INDEX i ON t (a)", true},
	} {
		m := &Message{Kind: "command", Seq: c.seq, Query: c.q}
		got, err := m.Statement()
		if ok := err == nil; got != c.want || ok != c.ok {
			t.Errorf("Statement(%q, seq %d) = %q, %v; want %q, ok %v", c.q, c.seq, got, err, c.want, c.ok)
		}
	}
}

func TestInTransaction(t *testing.T) {
	for q, want := range map[string]string{
		"CREATE INDEX CONCURRENTLY i ON t (a)":                      "CREATE INDEX i ON t (a)",
		"create unique index concurrently if not exists i on t (a)": "create unique index if not exists i on t (a)",
		"DROP INDEX CONCURRENTLY i":                                 "DROP INDEX i",
		"REINDEX INDEX CONCURRENTLY i":                              "REINDEX INDEX i",
		"CREATE INDEX concurrently_named ON t (a)":                  "CREATE INDEX concurrently_named ON t (a)",
		"ALTER TABLE t ADD c int":                                   "ALTER TABLE t ADD c int",
	} {
		if got := InTransaction(q); got != want {
			t.Errorf("InTransaction(%q) = %q, want %q", q, got, want)
		}
	}
}

func TestParse(t *testing.T) {
	m, err := Parse([]byte(strings.Repeat("0", 64) + `{"v":1,"kind":"command","seq":1,"query":"ALTER TABLE t ADD c int","objects":[{"type":"table","schema":"public","identity":"public.t","tag":"ALTER TABLE","table":["public","t","r"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if tn, ok := m.Objects[0].Tables(); !ok || tn != (TableName{"public", "t"}) {
		t.Errorf("Tables() = %v, %v", tn, ok)
	}
	for _, bad := range []string{`{"v":99,"kind":"command"}`, `{"v":1,"kind":"other"}`, `not json`} {
		if _, err := Parse([]byte(strings.Repeat("0", 64) + bad)); err == nil {
			t.Errorf("Parse(%s): no error", bad)
		}
	}
	d := Object{Type: "table column", Names: []string{"s", "t", "c"}}
	if tn, ok := d.Tables(); !ok || tn != (TableName{"s", "t"}) {
		t.Errorf("dropped column: Tables() = %v, %v", tn, ok)
	}
}

func TestWithNoData(t *testing.T) {
	for q, want := range map[string]string{
		"CREATE TABLE x AS SELECT * FROM t":      "CREATE TABLE x AS SELECT * FROM t\nWITH NO DATA",
		"CREATE TABLE x AS SELECT 1 -- one":      "CREATE TABLE x AS SELECT 1 -- one\nWITH NO DATA",
		"CREATE TABLE x AS TABLE t WITH DATA;":   "CREATE TABLE x AS TABLE t WITH NO DATA",
		"create table x as table t with no data": "create table x as table t with no data",
	} {
		if got := WithNoData(q); got != want {
			t.Errorf("WithNoData(%q) = %q, want %q", q, got, want)
		}
	}
}
