package schema

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/rs/zerolog"
	"github.com/walapply/walapply/internal/testutil"
)

// TestEntryTable: the table of an index build, read from pg_dump's text
// as it quotes names; anything else has none.
func TestEntryTable(t *testing.T) {
	for _, c := range []struct {
		kind, sql string
		want      Object
		ok        bool
	}{
		{"CONSTRAINT", "--\n\nALTER TABLE ONLY public.pgbench_accounts\n    ADD CONSTRAINT pgbench_accounts_pkey PRIMARY KEY (aid);\n\n\n--\n", Object{"public", "pgbench_accounts"}, true},
		{"INDEX", "-- a comment\n--\n\nCREATE INDEX v ON app.t USING btree (v);\n", Object{"app", "t"}, true},
		{"INDEX", "--\n", Object{}, false},
		{"CONSTRAINT", "ALTER TABLE ONLY \"My Sch\".\"T\"\"x\"\n    ADD CONSTRAINT u UNIQUE (a);\n", Object{"My Sch", `T"x`}, true},
		{"INDEX", "CREATE INDEX big_v ON app.big USING btree (v);\n", Object{"app", "big"}, true},
		{"INDEX", "CREATE UNIQUE INDEX \"Idx.1\" ON \"user\".t1 USING btree (a);\n", Object{"user", "t1"}, true},
		{"INDEX", "CREATE INDEX p_v ON ONLY app.parent USING btree (v);\n", Object{}, false},
		{"INDEX", "CREATE INDEX i ON app;\n", Object{}, false},
		{"INDEX", "CREATE INDEX i ON app.\n", Object{}, false},
		{"INDEX", "CREATE INDEX \"unterminated ON app.t USING btree (v);\n", Object{}, false},
		{"FK CONSTRAINT", "ALTER TABLE ONLY app.m\n    ADD CONSTRAINT m_fk FOREIGN KEY (a) REFERENCES app.accounts(id);\n", Object{}, false},
		{"TRIGGER", "CREATE TRIGGER touch BEFORE UPDATE ON app.t FOR EACH ROW EXECUTE FUNCTION app.f();\n", Object{}, false},
		{"INDEX ATTACH", "ALTER INDEX app.p_v ATTACH PARTITION app.c_v;\n", Object{}, false},
	} {
		got, ok := Entry{Kind: c.kind, SQL: c.sql}.Table()
		if got != c.want || ok != c.ok {
			t.Errorf("%q: %v %v, want %v %v", c.sql, got, ok, c.want, c.ok)
		}
	}
}

var earlyEntries = []Entry{
	{Name: "a a_pkey", Kind: "CONSTRAINT", Schema: "app", SQL: "ALTER TABLE ONLY app.a\n    ADD CONSTRAINT a_pkey PRIMARY KEY (id);\n"},
	{Name: "b b_pkey", Kind: "CONSTRAINT", Schema: "app", SQL: "ALTER TABLE ONLY app.b\n    ADD CONSTRAINT b_pkey PRIMARY KEY (id);\n"},
	{Name: "a_v", Kind: "INDEX", Schema: "app", SQL: "CREATE INDEX a_v ON app.a USING btree (v);\n"},
	{Name: "b b_fk", Kind: "FK CONSTRAINT", Schema: "app", SQL: "ALTER TABLE ONLY app.b\n    ADD CONSTRAINT b_fk FOREIGN KEY (a) REFERENCES app.a(id);\n"},
	{Name: "c_v", Kind: "INDEX", Schema: "app", SQL: "CREATE INDEX c_v ON app.c USING btree (v);\n"},
}

// TestEarlyBuilds: a copied table's builds run, on connections of their
// own after the preamble, at most workers of them; Finish leaves the rest
// in the section's order, including the builds of a table never copied.
func TestEarlyBuilds(t *testing.T) {
	target := &fakeTarget{}
	var log testutil.LogBuffer
	b := StartEarlyBuilds(context.Background(), "SET x = 1;\n", earlyEntries, 1, target.connect, nil, zerolog.New(&log))
	b.Copied(Object{"app", "a"})
	b.Copied(Object{"app", "a"}) // twice: nothing more
	b.Copied(Object{"app", "nope"})
	rest, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if want := []Entry{earlyEntries[1], earlyEntries[3], earlyEntries[4]}; !slices.Equal(rest, want) {
		t.Errorf("rest %v, want %v", rest, want)
	}
	if len(target.conns) != 1 {
		t.Fatalf("%d connections, want 1 (one worker)", len(target.conns))
	}
	if got, want := target.conns[0].ran, []string{"SET x = 1;", earlyEntries[0].SQL, earlyEntries[2].SQL}; !slices.Equal(got, want) {
		t.Errorf("ran %q, want %q", got, want)
	}
	if log.Count(`"table":"app.a"`, `"index_builds":2`, "now that it is copied") != 1 {
		t.Errorf("log:\n%s", &log)
	}

	// Two workers, two tables: every build ran once, no worker idles on a connection it did not need.
	target = &fakeTarget{fail: map[string]*pgconn.PgError{earlyEntries[1].SQL: {Code: "42P16"}}} // already there
	b = StartEarlyBuilds(context.Background(), "", earlyEntries, 4, target.connect, nil, zerolog.Nop())
	b.Copied(Object{"app", "a"})
	b.Copied(Object{"app", "b"})
	rest, err = b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if want := []Entry{earlyEntries[3], earlyEntries[4]}; !slices.Equal(rest, want) {
		t.Errorf("rest %v, want %v", rest, want)
	}
	var ran []string
	for _, c := range target.conns {
		ran = append(ran, c.ran...)
	}
	slices.Sort(ran)
	if want := []string{earlyEntries[0].SQL, earlyEntries[1].SQL, earlyEntries[2].SQL}; len(target.conns) > 3 || !slices.Equal(ran, want) {
		t.Errorf("%d connections ran %q, want %q", len(target.conns), ran, want)
	}
}

// TestEarlyBuildsFail: the first failing build is handed to fail and
// returned by Finish with the entry named; nothing is queued after it.
func TestEarlyBuildsFail(t *testing.T) {
	target := &fakeTarget{fail: map[string]*pgconn.PgError{earlyEntries[0].SQL: {Severity: "ERROR", Code: "23505", Message: "could not create unique index"}}}
	var heard error
	b := StartEarlyBuilds(context.Background(), "", earlyEntries, 1, target.connect, func(err error) { heard = err }, zerolog.Nop())
	b.Copied(Object{"app", "a"})
	_, err := b.Finish()
	var entry *EntryError
	var pe *pgconn.PgError
	if !errors.As(err, &entry) || entry.Entry.Name != "a a_pkey" || !errors.As(err, &pe) || pe.Code != "23505" || heard != err {
		t.Fatalf("Finish: %v (fail heard %v), want the a_pkey entry's 23505", err, heard)
	}
	for _, c := range target.conns {
		if slices.Contains(c.ran, earlyEntries[2].SQL) {
			t.Errorf("a_v ran after a_pkey failed on the same connection: %q", c.ran)
		}
	}
}

// TestEarlyBuildsCancelled: a build cut short by the caller's context is
// not a failure of its own, and Finish reports the cancellation rather
// than leave that build out of what remains to do.
func TestEarlyBuildsCancelled(t *testing.T) {
	target := &fakeTarget{block: map[string]bool{earlyEntries[0].SQL: true}}
	ctx, cancel := context.WithCancel(context.Background())
	var heard error
	b := StartEarlyBuilds(ctx, "", earlyEntries, 1, target.connect, func(err error) { heard = err }, zerolog.Nop())
	b.Copied(Object{"app", "a"})
	cancel()
	rest, err := b.Finish()
	if !errors.Is(err, context.Canceled) || rest != nil || heard != nil {
		t.Fatalf("Finish: %v, %v (fail heard %v); want the cancellation and nothing left", rest, err, heard)
	}
}
