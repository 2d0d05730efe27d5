package ddl

import (
	"errors"
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
	const migration = "CREATE TABLE a (id int PRIMARY KEY); INSERT INTO a VALUES (1); SET search_path = s, public;\n" +
		"-- a comment; with a semicolon\nALTER TABLE t ADD COLUMN x int; CREATE UNIQUE INDEX ON t (x);\n" +
		"GRANT app TO other; CREATE ROLE r; COMMENT ON TABLE a IS 'it''s; a'; SELECT 1; TRUNCATE a; REINDEX TABLE a;\n" +
		"CREATE OR REPLACE TEMP VIEW v AS SELECT 1; DROP TABLE IF EXISTS b; GRANT SELECT ON a TO PUBLIC; SELECT 1 INTO c; CREATE TABLE d AS SELECT 2"
	for _, c := range []struct {
		q    string
		seq  int
		tag  string
		want string
		err  error
	}{
		{"ALTER TABLE t ADD c int", 1, "ALTER TABLE", "ALTER TABLE t ADD c int", nil},
		{"ALTER TABLE t ADD c int", 1, "", "ALTER TABLE t ADD c int", nil}, // (no tag: not checked)
		{"SET search_path = s; ALTER TABLE t ADD c int; COMMIT", 1, "ALTER TABLE", "ALTER TABLE t ADD c int", nil},
		{"INSERT INTO t VALUES (1); ALTER TABLE t ADD c int", 1, "ALTER TABLE", "ALTER TABLE t ADD c int", nil},
		{"ALTER TABLE t ADD c int; ALTER TABLE t ADD d int", 1, "ALTER TABLE", "ALTER TABLE t ADD c int", nil},
		{"ALTER TABLE t ADD c int; ALTER TABLE t ADD d int", 2, "ALTER TABLE", "ALTER TABLE t ADD d int", nil},
		{"ALTER TABLE t ADD c int; ALTER TABLE t ADD d int", 3, "ALTER TABLE", "", ErrMismatch},
		{"ALTER TABLE t ADD c int; CREATE INDEX ON t (c)", 2, "ALTER TABLE", "", ErrMismatch},
		{"CREATE TABLE t (); CREATE INDEX ON t (c)", 1, "CREATE INDEX", "", ErrMismatch},
		{"BEGIN; ALTER TABLE t ADD c int; ROLLBACK; ALTER TABLE t ADD d int", 1, "ALTER TABLE", "", ErrSeveral},
		{"BEGIN; ALTER TABLE t ADD c int; ROLLBACK", 1, "ALTER TABLE", "ALTER TABLE t ADD c int", nil}, // (never decoded)
		{"DO $$BEGIN EXECUTE 'ALTER TABLE t ADD c int'; END$$", 1, "ALTER TABLE", "", ErrNested},       // inside a DO block
		{"ALTER TABLE t ADD d int; DO $$BEGIN EXECUTE 'ALTER TABLE t ADD c int'; END$$", 0, "ALTER TABLE", "", ErrNested},
		{"SELECT add_column()", 1, "ALTER TABLE", "", ErrNested}, // inside a function
		{"/* why */ CREATE INDEX i ON t (a)", 1, "CREATE INDEX", "/* why */ CREATE INDEX i ON t (a)", nil},
		{migration, 1, "CREATE TABLE", "CREATE TABLE a (id int PRIMARY KEY)", nil},
		{migration, 2, "ALTER TABLE", "-- a comment; with a semicolon\nALTER TABLE t ADD COLUMN x int", nil},
		{migration, 3, "CREATE INDEX", "CREATE UNIQUE INDEX ON t (x)", nil},
		{migration, 4, "COMMENT", "COMMENT ON TABLE a IS 'it''s; a'", nil},
		{migration, 5, "CREATE VIEW", "CREATE OR REPLACE TEMP VIEW v AS SELECT 1", nil},
		{migration, 6, "DROP TABLE", "DROP TABLE IF EXISTS b", nil},
		{migration, 7, "GRANT", "GRANT SELECT ON a TO PUBLIC", nil},
		{migration, 8, "SELECT INTO", "SELECT 1 INTO c", nil},
		{migration, 9, "CREATE TABLE AS", "CREATE TABLE d AS SELECT 2", nil},
		{migration, 10, "CREATE TABLE", "", ErrMismatch},
		{"CREATE USER MAPPING FOR PUBLIC SERVER s; ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO PUBLIC", 2, "ALTER DEFAULT PRIVILEGES",
			"ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO PUBLIC", nil},
		{"CREATE DATABASE x; CREATE CONSTRAINT TRIGGER tr AFTER INSERT ON t FOR EACH ROW EXECUTE FUNCTION f()", 1, "CREATE TRIGGER",
			"CREATE CONSTRAINT TRIGGER tr AFTER INSERT ON t FOR EACH ROW EXECUTE FUNCTION f()", nil},
		{"CREATE FUNCTION f() RETURNS int AS $b$ SELECT 1 INTO x; $b$ LANGUAGE sql; CREATE TABLE \"INTO\" ()", 2, "CREATE TABLE",
			"CREATE TABLE \"INTO\" ()", nil},
	} {
		m := &Message{Kind: "command", Seq: c.seq, Tag: c.tag, Query: c.q}
		got, err := m.Statement()
		if got != c.want || !errors.Is(err, c.err) || (err == nil) != (c.err == nil) {
			t.Errorf("Statement(%q, seq %d, %s) = %q, %v; want %q, %v", c.q, c.seq, c.tag, got, err, c.want, c.err)
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
