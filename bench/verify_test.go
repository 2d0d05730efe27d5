package bench

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/walapply/walapply/testenv"
)

// TestVerifyDetectsDifferences checks that the comparison run after every
// drain passes identical databases and fails, naming the row, on each kind
// of difference a broken applier could leave.
func TestVerifyDetectsDifferences(t *testing.T) {
	pair := testenv.NewPair(t, testenv.PairOptions{})
	ctx := context.Background()
	r := &runEnv{db: benchDB, source: pair.Source, target: pair.Target}
	for _, c := range []*testenv.Cluster{pair.Source, pair.Target} {
		if err := c.CreateDatabase(ctx, benchDB); err != nil {
			t.Fatal(err)
		}
	}
	schema := []string{
		`DROP TABLE IF EXISTS keyed, nokey, "Odd ""name"""`,
		`CREATE TABLE keyed (a int, b text, big text, PRIMARY KEY (b, a))`,
		`ALTER TABLE keyed ALTER COLUMN big SET STORAGE EXTERNAL`,
		`INSERT INTO keyed SELECT i, 'k' || i, repeat(md5(i::text), 4000) FROM generate_series(1, 100) i`,
		`CREATE TABLE nokey (v int, w jsonb)`,
		`INSERT INTO nokey VALUES (1, '{"a": 1}'), (1, '{"a": 1}'), (2, NULL)`,
		`CREATE TABLE "Odd ""name""" (id int PRIMARY KEY)`,
		`INSERT INTO "Odd ""name""" VALUES (1)`,
	}
	cases := []struct {
		name   string
		target []string // run on the target after the schema
		want   string   // in the error; "" means identical
	}{
		{"identical", nil, ""},
		{"missing row", []string{`DELETE FROM keyed WHERE a = 100`}, "only on the source"},
		{"extra row", []string{`INSERT INTO keyed VALUES (101, 'k101', 'x')`}, "only on the target"},
		{"toasted value differs", []string{`UPDATE keyed SET big = big || 'x' WHERE a = 7`}, "row (k7,7) differs"},
		{"key differs", []string{`UPDATE keyed SET a = 1000 WHERE a = 5`}, "row (k5,1000) only on the target; row (k5,5) only on the source"},
		{"duplicate lost without a key", []string{`DELETE FROM nokey WHERE ctid = (SELECT min(ctid) FROM nokey WHERE v = 1)`}, "table nokey"},
		{"quoted name", []string{`UPDATE "Odd ""name""" SET id = 2`}, `table Odd "name"`},
		{"table missing", []string{`DROP TABLE nokey`}, "tables of schema public"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, c := range []*testenv.Cluster{pair.Source, pair.Target} {
				if err := r.exec(ctx, c, schema...); err != nil {
					t.Fatal(err)
				}
			}
			if err := r.exec(ctx, pair.Target, tc.target...); err != nil {
				t.Fatal(err)
			}
			v, err := verify(ctx, pair.Source, pair.Target, benchDB)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("identical databases: %v", err)
				}
				if v.Tables != 3 || v.Rows != 104 {
					t.Fatalf("verified %d tables, %d rows; want 3 tables, 104 rows", v.Tables, v.Rows)
				}
				return
			}
			if !errors.Is(err, ErrMismatch) {
				t.Fatalf("got %v, want ErrMismatch", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
		})
	}
}
