package apply_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/testenv"
)

// compare's row digests from a PostgreSQL 15 source to an 18 target, in
// both forms (values hashed as a record, and the text form kept for
// servers before 14): the same rows are equal, although the enum's OIDs,
// the int and bigint of one column and the servers differ; and a change
// to any one column of one row on the target, each in turn, makes the
// table different with that row's key listed: a case change under a
// nondeterministic collation, whitespace in json, an enum label, money,
// an array element, char padding, and the others.
func TestCompareDigests(t *testing.T) {
	for _, v := range []int{15, 18} {
		if _, err := testenv.BinDir(v); err != nil {
			t.Skipf("PostgreSQL %d not available: %v", v, err)
		}
	}
	ctx := context.Background()
	source := testenv.NewCluster(t, testenv.Options{Version: 15})
	target := testenv.NewCluster(t, testenv.Options{Version: 18})
	ci := `CREATE COLLATION ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false)`
	schema := func(big string) string {
		return `CREATE TABLE t (id int PRIMARY KEY, v text COLLATE ci, m mood, n numeric, u uuid, ip inet, mo money, js json, jb jsonb,
			arr text[], bp char(4), tz timestamptz, f float8, b bytea, big ` + big + `)`
	}
	testenv.MustExec(t, source, "postgres", ci, `CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')`, schema("int"),
		`INSERT INTO t SELECT i, 'Abc' || i, 'ok', i / 3.0, md5(i::text)::uuid, '10.0.0.1/24', i, '{"a": 1}', '{"a": 1}',
			ARRAY['x', NULL, 'y' || i], 'ab', '2026-12-03 10:00:00+00', i * 0.1, '\x00ff', i * 1000
		FROM generate_series(1, 50) i`,
		`CREATE PUBLICATION pub FOR TABLE t`)
	// Another enum first: the target's labels get other OIDs.
	testenv.MustExec(t, target, "postgres", ci, `CREATE TYPE other AS ENUM ('a', 'b', 'c', 'd')`,
		`CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')`, schema("bigint"))
	copyRows(t, ctx, source, target)

	cfg := apply.CompareConfig{Source: source.ConnString("postgres"), Target: target.ConnString("postgres"), Keys: 3, Jobs: 2}
	changes := []string{
		`v = 'abc7'`, `m = 'happy'`, `n = 7 / 3.0 + 1e-20`, `u = md5('x')::uuid`, `ip = '10.0.0.1/25'`, `mo = 8`,
		`js = '{"a":1}'`, `jb = '{"a": 2}'`, `arr = ARRAY['x', NULL, 'y8']`, `bp = 'abc'`,
		`tz = '2026-12-03 10:00:00.000001+00'`, `f = 0.7000000000000001`, `b = '\x00fe'`, `big = 7001`,
	}
	for _, form := range []string{"hashed", "text"} {
		t.Run(form, func(t *testing.T) {
			if form == "text" {
				defer apply.UseTextDigest()()
			}
			rep, err := apply.Compare(ctx, cfg)
			if err != nil || !rep.Equal {
				t.Fatalf("the same rows: %v %+v", err, rep)
			}
			for _, set := range changes {
				testenv.MustExec(t, target, "postgres", "UPDATE t SET "+set+" WHERE id = 7")
				rep, err := apply.Compare(ctx, cfg)
				if err != nil {
					t.Fatal(err)
				}
				if got := fmt.Sprint(rep.Tables[0].Keys); rep.Equal || got != "[{7 changed}]" {
					t.Errorf("after SET %s on the target: equal %v, keys %s", set, rep.Equal, got)
				}
				copyRows(t, ctx, source, target)
			}
		})
	}
}

// copyRows makes the target's table t the source's, row for row (through
// text, as the tables' types differ in one column).
func copyRows(t *testing.T, ctx context.Context, source, target *testenv.Cluster) {
	t.Helper()
	src, err := source.Connect(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close(ctx)
	dst, err := target.Connect(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close(ctx)
	var rows []string
	if err := src.QueryRow(ctx, `SELECT array_agg(t::text ORDER BY id) FROM t`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	testenv.MustExecConn(t, ctx, dst, "TRUNCATE t")
	if _, err := dst.Exec(ctx, `INSERT INTO t SELECT (r::t).* FROM unnest($1::text[]) r`, rows); err != nil {
		t.Fatal(err)
	}
}
