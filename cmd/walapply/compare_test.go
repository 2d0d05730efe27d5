package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/testenv"
)

// runCompare runs 'walapply compare' and returns its output and exit
// status (0, 1 or 2, as main would exit).
func runCompare(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out, stderr bytes.Buffer
	code := exitCode(&out, &stderr, "compare", compareMain(context.Background(), args, &out))
	return out.String() + stderr.String(), code
}

// compare after a replication run: equal; then a row changed, one deleted
// and one added on the target make their tables different (exit status 1)
// with the keys listed; columns in another order and an extra column on
// the target do not count.
func TestCompareCommand(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		ctx := context.Background()
		pair := testenv.NewPair(t, testenv.PairOptions{Version: version})
		testenv.MustExec(t, pair.Source, "postgres",
			`CREATE TABLE a (id int PRIMARY KEY, n numeric, v text)`,
			`CREATE TABLE b (k1 int, k2 text, v int, PRIMARY KEY (k1, k2))`,
			`CREATE TABLE c (id int PRIMARY KEY, x int, y text)`,
			`CREATE TABLE d (v text)`,
			`CREATE PUBLICATION pub FOR TABLE a, b, c, d`)
		testenv.MustExec(t, pair.Target, "postgres",
			`CREATE TABLE a (id int PRIMARY KEY, n numeric, v text)`,
			`CREATE TABLE b (k1 int, k2 text, v int, PRIMARY KEY (k1, k2))`,
			`CREATE TABLE c (y text, extra int DEFAULT 7, id int PRIMARY KEY, x int)`,
			`CREATE TABLE d (v text)`)
		src, dst := pair.Source.ConnString("postgres"), pair.Target.ConnString("postgres")
		r, err := apply.Start(ctx, apply.Config{Source: src, Target: dst, Slot: "cmp", CreateSlot: true, Publications: []string{"pub"},
			FeedbackInterval: 50 * time.Millisecond, ProgressInterval: -1, SpillDir: t.TempDir(),
			Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)})
		if err != nil {
			t.Fatal(err)
		}
		testenv.MustExec(t, pair.Source, "postgres",
			`INSERT INTO a SELECT i, i * 1.5, 'v' || i FROM generate_series(1, 200) i`,
			`INSERT INTO b SELECT i, 'x' || i, i FROM generate_series(1, 50) i`,
			`INSERT INTO c SELECT i, i, NULL FROM generate_series(1, 30) i`,
			`INSERT INTO d SELECT 'r' || i FROM generate_series(1, 10) i`,
			`UPDATE a SET v = NULL WHERE id = 7`)
		if err := r.WaitCaughtUp(ctx); err != nil {
			t.Fatal(err)
		}
		if err := r.Stop(); err != nil {
			t.Fatal(err)
		}
		args := []string{"--source", src, "--target", dst, "--jobs", "3"}

		out, code := runCompare(t, args...)
		if code != 0 || !strings.Contains(out, `equal      "public"."c": 30 rows`) || !strings.Contains(out, "4 tables: 4 equal, 0 different") {
			t.Fatalf("compare after replication: exit %d\n%s", code, out)
		}
		t.Logf("equal:\n%s", out)

		testenv.MustExec(t, pair.Target, "postgres",
			`UPDATE a SET v = 'changed' WHERE id = 5`,
			`DELETE FROM b WHERE k1 = 3`,
			`INSERT INTO c VALUES (NULL, 7, 1000, 1)`,
			`UPDATE c SET extra = 8`) // not a published column: no difference
		out, code = runCompare(t, append(args, "--publication", "pub", "--keys", "5")...)
		for _, want := range []string{
			`DIFFERENT  "public"."a": 200 rows on the source, 200 on the target, checksums differ`, "    changed  5\n",
			`DIFFERENT  "public"."b": 50 rows on the source, 49 on the target`, "    missing  (3,x3)\n",
			`DIFFERENT  "public"."c": 30 rows on the source, 31 on the target`, "    extra    1000\n",
			`equal      "public"."d": 10 rows`, "4 tables: 1 equal, 3 different", "3 of 4 tables differ",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("compare --keys 5 after changes on the target: no %q in\n%s", want, out)
			}
		}
		if code != 1 {
			t.Errorf("compare with differences: exit status %d, want 1", code)
		}
		t.Logf("different:\n%s", out)

		out, code = runCompare(t, append(args, "--json", "--keys", "5")...)
		var rep apply.CompareReport
		if err := json.Unmarshal([]byte(out[:strings.LastIndex(out, "}")+1]), &rep); err != nil || code != 1 {
			t.Fatalf("compare --json: exit %d, %v\n%s", code, err, out)
		}
		got := map[string]string{}
		for _, tc := range rep.Tables {
			got[tc.Name] = ""
			if tc.Equal {
				got[tc.Name] = "equal"
			}
			for _, k := range tc.Keys {
				got[tc.Name] += k.Kind + ":" + k.Key
			}
		}
		if rep.Equal || len(rep.Tables) != 4 || got["a"] != "changed:5" || got["b"] != "missing:(3,x3)" || got["c"] != "extra:1000" || got["d"] != "equal" {
			t.Errorf("compare --json: %+v", rep)
		}

		// Usage and other errors: exit status 2.
		if out, code := runCompare(t, "--source", src); code != 2 {
			t.Errorf("compare without --target: exit %d: %s", code, out)
		}
		if out, code := runCompare(t, append(args, "--publication", "nope")...); code != 2 || !strings.Contains(out, "nope") {
			t.Errorf("compare --publication nope: exit %d: %s", code, out)
		}
	})
}

// Values whose text forms depend on the server's settings and version
// compare equal from a PostgreSQL 15 source to an 18 target set up
// differently (time zone, date style, float digits, bytea output).
func TestCompareAwkwardTypes(t *testing.T) {
	for _, v := range []int{15, 18} {
		if _, err := testenv.BinDir(v); err != nil {
			t.Skipf("PostgreSQL %d not available: %v", v, err)
		}
	}
	source := testenv.NewCluster(t, testenv.Options{Version: 15})
	target := testenv.NewCluster(t, testenv.Options{Version: 18, Settings: map[string]string{
		"TimeZone": "Asia/Kolkata", "DateStyle": "SQL, DMY", "IntervalStyle": "sql_standard", "extra_float_digits": "0", "bytea_output": "escape",
	}})
	schema := `CREATE TABLE w (id int PRIMARY KEY, f8 float8, f4 float4, tz timestamptz, ts timestamp, d date, iv interval,
		n numeric, j json, jb jsonb, b bytea, ia int[], ta text[], t text)`
	rows := `INSERT INTO w VALUES
		(1, 0.1, 0.1, '2026-12-01 15:04:05.123456+02', '2026-12-01 15:04:05', '2026-02-03', '1 day 02:03:04.5',
		 123.4500, '{"b": 1,  "a": [1, 2]}', '{"b": 1, "a": [1, 2]}', '\x00ff27', '{1,NULL,3}', '{"a b",NULL,"c,d"}', 'é'),
		(2, 1e300, -3.4e38, 'infinity', '-infinity', 'infinity', '-1 mon', 'NaN', 'null', '[]', '', '{}', '{}', ''),
		(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
		(4, 'NaN', '-Infinity', '1999-12-31 23:59:59.999999-12', '2000-01-01', '1999-01-08', '-3 years +2 hours', -0.000001, '"x"', '"x"', '\x', '{{1,2},{3,4}}', '{""}', E'tab\there')`
	testenv.MustExec(t, source, "postgres", schema, rows, "CREATE PUBLICATION pub FOR TABLE w")
	testenv.MustExec(t, target, "postgres", schema, rows)
	args := []string{"--source", source.ConnString("postgres"), "--target", target.ConnString("postgres"), "--keys", "10"}
	out, code := runCompare(t, args...)
	if code != 0 {
		t.Fatalf("compare 15 -> 18 with the same rows: exit %d\n%s", code, out)
	}
	testenv.MustExec(t, target, "postgres", `UPDATE w SET f8 = 0.1000000000000001 WHERE id = 1`)
	if out, code = runCompare(t, args...); code != 1 || !strings.Contains(out, "changed  1\n") {
		t.Errorf("compare after a float8 changed in its 16th digit: exit %d\n%s", code, out)
	}
}

// A publication's column list and row filter: only the published columns
// and the rows the filter lets through count on the source.
func TestCompareColumnListRowFilter(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		pair := testenv.NewPair(t, testenv.PairOptions{Version: version})
		testenv.MustExec(t, pair.Source, "postgres",
			`CREATE TABLE e (id int PRIMARY KEY, v text, secret text)`,
			`INSERT INTO e SELECT i, 'v' || i, 's' || i FROM generate_series(1, 10) i`,
			`CREATE PUBLICATION pub FOR TABLE e (id, v) WHERE (id > 5)`)
		testenv.MustExec(t, pair.Target, "postgres",
			`CREATE TABLE e (id int PRIMARY KEY, v text)`,
			`INSERT INTO e SELECT i, 'v' || i FROM generate_series(6, 10) i`)
		args := []string{"--source", pair.Source.ConnString("postgres"), "--target", pair.Target.ConnString("postgres"), "--keys", "3"}
		if out, code := runCompare(t, args...); code != 0 {
			t.Fatalf("compare with a column list and a row filter: exit %d\n%s", code, out)
		}
		testenv.MustExec(t, pair.Target, "postgres", `INSERT INTO e VALUES (1, 'v1')`)
		if out, code := runCompare(t, args...); code != 1 || !strings.Contains(out, "    extra    1\n") {
			t.Errorf("compare with a row the filter leaves out on the target: exit %d\n%s", code, out)
		}
	})
}
