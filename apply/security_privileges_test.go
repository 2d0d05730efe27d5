package apply_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/testenv"
)

// docBlocks returns the SQL blocks of docs/SECURITY.md marked
// <!-- walapply-test: NAME -->, each as its statements: the documented
// grants are what the test runs.
func docBlocks(t *testing.T) map[string][]string {
	t.Helper()
	text, err := os.ReadFile("../docs/SECURITY.md")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)<!-- walapply-test: ([a-z0-9-]+) -->\\s*```sql\\n(.*?)```")
	out := map[string][]string{}
	for _, m := range re.FindAllStringSubmatch(string(text), -1) {
		var lines []string
		for _, l := range strings.Split(m[2], "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "--") {
				lines = append(lines, l)
			}
		}
		for _, s := range strings.Split(strings.Join(lines, " "), ";") {
			if s = strings.TrimSpace(s); s != "" {
				out[m[1]] = append(out[m[1]], s)
			}
		}
	}
	for _, want := range []string{"source-role", "publication", "target-role", "target-schema-create", "target-schema-precreated", "target-grants", "target-grants-two-phase", "source-grants-copy", "target-grants-copy"} {
		if len(out[want]) == 0 {
			t.Fatalf("docs/SECURITY.md has no walapply-test block %q", want)
		}
	}
	return out
}

// revokeOf turns "GRANT x TO r" into "REVOKE x FROM r".
func revokeOf(grant string) string {
	s := strings.Replace(grant, "GRANT ", "REVOKE ", 1)
	i := strings.LastIndex(s, " TO ")
	return s[:i] + " FROM " + s[i+len(" TO "):]
}

// rowsIn returns a query's rows as sorted text from database db of c.
func rowsIn(t *testing.T, c *testenv.Cluster, db, query string) []string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.ConnString(db))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	slices.Sort(out)
	return out
}

const (
	privPW     = "priv-test-pw"
	shopTables = `CREATE TABLE shop.items (id int PRIMARY KEY, name text, price numeric);
		CREATE TABLE shop.events (id bigint, payload jsonb);
		ALTER TABLE shop.events REPLICA IDENTITY FULL;
		CREATE TABLE shop.scratch (id int PRIMARY KEY)`
)

// TestLeastPrivileges runs walapply as the roles docs/SECURITY.md
// describes, created with the SQL written there: a REPLICATION role on the
// source that owns nothing, and on the target a role with the documented
// grants only. Streamed and two-phase transactions replicate; each target
// grant is shown to be needed.
func TestLeastPrivileges(t *testing.T) {
	t.Parallel()
	doc := docBlocks(t)
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		hba := []string{"host all walapply_source,walapply_target 127.0.0.1/32 scram-sha-256"}
		settings := map[string]string{"logical_decoding_work_mem": "64kB"}
		h := secHarness(t, testenv.Options{Version: version, HBA: hba, Settings: settings}, testenv.Options{Version: version, HBA: hba})
		src, dst := h.pair.Source, h.pair.Target

		// Source: the tables belong to app, which publishes them.
		h.source(`CREATE ROLE app LOGIN`, `GRANT CREATE ON DATABASE postgres TO app`, `CREATE SCHEMA shop AUTHORIZATION app`)
		h.source(doc["source-role"]...)
		h.source(`ALTER ROLE walapply_source PASSWORD ` + secLiteral(privPW))
		h.source(append(append([]string{`SET ROLE app`}, strings.Split(shopTables, ";")...), doc["publication"]...)...)

		// Target: database postgres lets walapply create its schema,
		// database appdb2 has it created for walapply.
		if err := dst.CreateDatabase(h.ctx, "appdb2"); err != nil {
			t.Fatal(err)
		}
		h.target(doc["target-role"]...)
		h.target(`ALTER ROLE walapply_target PASSWORD ` + secLiteral(privPW))
		for _, db := range []string{"postgres", "appdb2"} {
			testenv.MustExec(t, dst, db, append([]string{`CREATE SCHEMA shop`}, strings.Split(shopTables, ";")...)...)
			// An ordinary trigger must not fire on a replica.
			testenv.MustExec(t, dst, db, `CREATE FUNCTION shop.boom() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RAISE EXCEPTION 'an ordinary trigger fired'; END$$`,
				`CREATE TRIGGER boom BEFORE INSERT OR UPDATE OR DELETE ON shop.items FOR EACH ROW EXECUTE FUNCTION shop.boom()`)
		}
		subst := func(sqls []string, db string) []string {
			out := make([]string, len(sqls))
			for i, s := range sqls {
				out[i] = strings.ReplaceAll(s, "appdb", db)
			}
			return out
		}
		testenv.MustExec(t, dst, "postgres", subst(doc["target-schema-create"], "postgres")...)
		testenv.MustExec(t, dst, "postgres", doc["target-grants"]...)
		testenv.MustExec(t, dst, "appdb2", doc["target-schema-precreated"]...)
		testenv.MustExec(t, dst, "appdb2", doc["target-grants"]...)
		testenv.MustExec(t, dst, "appdb2", doc["target-grants-two-phase"]...)
		if got := h.rows(dst, `SELECT rolsuper::text || rolcreatedb::text || rolcreaterole::text || rolbypassrls::text || rolreplication::text FROM pg_roles WHERE rolname = 'walapply_target'`); got[0] != "falsefalsefalsefalsefalse" {
			t.Fatalf("walapply_target has role attributes: %v", got)
		}

		// The workload, before walapply first runs: it stays pending
		// through the failing runs below.
		h.source(`SELECT pg_create_logical_replication_slot('priv', 'pgoutput')`,
			`SELECT pg_create_logical_replication_slot('priv2', 'pgoutput', false, true)`)
		h.source(`INSERT INTO shop.items SELECT g, 'item ' || g, g * 1.5 FROM generate_series(1, 100) g`,
			`UPDATE shop.items SET price = price + 1 WHERE id <= 10`,
			`DELETE FROM shop.items WHERE id > 90`,
			`INSERT INTO shop.events VALUES (1, '{"a": 1}'), (2, '{"b": 2}'), (2, '{"b": 2}')`,
			`UPDATE shop.events SET payload = '{"c": 3}' WHERE id = 1`,
			`DELETE FROM shop.events WHERE id = 2 AND ctid = (SELECT min(ctid) FROM shop.events WHERE id = 2)`,
			`INSERT INTO shop.scratch SELECT generate_series(1, 10)`,
			`TRUNCATE shop.scratch`,
			// Streamed: far more than 64kB of changes.
			`INSERT INTO shop.items SELECT g, repeat('x', 200), 0 FROM generate_series(1000, 3000) g`,
			`BEGIN; INSERT INTO shop.scratch VALUES (1); PREPARE TRANSACTION 'p1'`, `COMMIT PREPARED 'p1'`,
			`BEGIN; INSERT INTO shop.scratch VALUES (2); PREPARE TRANSACTION 'p2'`, `ROLLBACK PREPARED 'p2'`)

		srcURL := secUserURL(src, "walapply_source", privPW)
		cfg := h.secConfig("priv", "walapply_pub", nil)
		cfg.Source, cfg.Target = srcURL, secUserURL(dst, "walapply_target", privPW)

		// Each target grant is needed: without it, the start lists it
		// and applies nothing. CREATE on the database goes first: the
		// first run that gets past it creates the schema for good.
		needed := append(subst(doc["target-schema-create"], "postgres"), doc["target-grants"]...)
		for _, grant := range needed {
			testenv.MustExec(t, dst, "postgres", revokeOf(grant))
			err := secRun(t, cfg)
			target, source := privilegeStatements(t, err)
			if want := listedAs(grant); !slices.Equal(target, want) || len(source) > 0 {
				t.Errorf("without %q: listed\n%s\non the target and %v on the source; want\n%s", grant, strings.Join(target, "\n"), source, strings.Join(want, "\n"))
			}
			if got := h.rows(dst, `SELECT count(*)::text FROM shop.items`); got[0] != "0" {
				t.Fatalf("without %q: %s rows applied", grant, got[0])
			}
			if got := h.secOrigin("priv"); got != "none" {
				t.Fatalf("without %q: the origin was created (%s)", grant, got)
			}
			testenv.MustExec(t, dst, "postgres", grant)
		}
		// The source role needs REPLICATION.
		h.source(`ALTER ROLE walapply_source NOREPLICATION`)
		_, source := privilegeStatements(t, secRun(t, cfg))
		if want := []string{`ALTER ROLE "walapply_source" REPLICATION`}; !slices.Equal(source, want) {
			t.Errorf("source role without REPLICATION: listed %v, want %v", source, want)
		}
		h.source(`ALTER ROLE walapply_source REPLICATION`)

		// With exactly the documented privileges everything replicates.
		compare := func(db string) {
			t.Helper()
			for _, q := range []string{`SELECT (i.*)::text FROM shop.items i`, `SELECT (e.*)::text FROM shop.events e`, `SELECT (s.*)::text FROM shop.scratch s`} {
				want, got := rowsIn(t, src, "postgres", q), rowsIn(t, dst, db, q)
				if !slices.Equal(want, got) {
					t.Errorf("%s in %s differs:\n%s", q, db, diffRows(want, got))
				}
			}
		}
		stop := h.runApplier(cfg)
		h.waitCaughtUp("priv", time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		compare("postgres")

		// SELECT alone: an UPDATE reads the columns that locate its row,
		// and the start names SELECT.
		testenv.MustExec(t, dst, "postgres", `REVOKE SELECT ON ALL TABLES IN SCHEMA shop FROM walapply_target`)
		h.source(`UPDATE shop.items SET price = 0 WHERE id = 1`)
		before := h.secOrigin("priv")
		target, _ := privilegeStatements(t, secRun(t, cfg))
		if want := listedAs(`GRANT SELECT ON ALL TABLES IN SCHEMA shop TO walapply_target`); !slices.Equal(target, want) {
			t.Errorf("without SELECT: listed\n%s\nwant\n%s", strings.Join(target, "\n"), strings.Join(want, "\n"))
		}
		if after := h.secOrigin("priv"); after != before {
			t.Errorf("origin moved from %s to %s past a failed start", before, after)
		}
		testenv.MustExec(t, dst, "postgres", `GRANT SELECT ON ALL TABLES IN SCHEMA shop TO walapply_target`)
		stop = h.runApplier(cfg)
		h.waitCaughtUp("priv", time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		compare("postgres")

		cfg2 := h.secConfig("priv2", "walapply_pub", nil)
		cfg2.Source, cfg2.Target, cfg2.TwoPhase = srcURL, strings.Replace(secUserURL(dst, "walapply_target", privPW), "/postgres?", "/appdb2?", 1), true
		stop = h.runApplier(cfg2)
		h.waitCaughtUp("priv2", time.Minute)
		// One more prepared transaction, left prepared for a moment.
		h.source(`BEGIN; INSERT INTO shop.scratch VALUES (3); PREPARE TRANSACTION 'p3'`)
		h.waitCaughtUp("priv2", time.Minute)
		if got := rowsIn(t, dst, "appdb2", `SELECT owner::text FROM pg_prepared_xacts`); fmt.Sprint(got) != "[walapply_target]" {
			t.Errorf("prepared on the target: %v, want one transaction of walapply_target", got)
		}
		h.source(`COMMIT PREPARED 'p3'`)
		h.waitCaughtUp("priv2", time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		compare("appdb2")
		if got := rowsIn(t, dst, "appdb2", `SELECT count(*)::text FROM pg_prepared_xacts`); got[0] != "0" {
			t.Errorf("%s transactions left prepared on the target", got[0])
		}

		// The initial copy, and status, with the documented grants
		// (privileges_integration_test.go).
		leastPrivilegeCopy(t, h, doc, compare)
		leastPrivilegeStatus(t, h)
	})
}
