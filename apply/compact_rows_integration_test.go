package apply_test

import (
	"testing"
	"time"

	"github.com/walapply/walapply/testenv"
)

// TestCompactionRowSources applies multi-row INSERT, UPDATE and DELETE
// statements whose values travel in text[] parameters (internal/compact/rows.go),
// with the values that are hard to carry that way: quotes, backslashes,
// braces, commas, the word NULL, empty strings and real NULLs, arrays
// (which must not be flattened), a type whose array delimiter is ';', a
// composite, a domain, an enum and a type in another schema, bytea, json,
// and quoted column names; then again with --binary, where odd's and
// withpair's rows use the VALUES form (array and composite columns) and
// plain's travel as typed arrays.
func TestCompactionRowSources(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		for _, binary := range []bool{false, true} {
			h := newHarness(t, version, nil, nil)
			h.both(
				`CREATE SCHEMA "Other"`,
				`CREATE TYPE "Other"."Mood" AS ENUM ('ok', 'not "ok"', 'a,b')`,
				`CREATE TYPE pair AS (x int, y text)`,
				`CREATE DOMAIN pos AS int CHECK (VALUE > 0)`,
				`CREATE TABLE odd ("Key" int PRIMARY KEY, "t, x" text, ia int[], ta text[], bx box, pr pair,
					d pos, m "Other"."Mood", b bytea, j jsonb, n numeric(8,2), c char(4), big text)`,
				`ALTER TABLE odd ALTER COLUMN big SET STORAGE EXTERNAL`,
				// Only types that have array types: with --binary its rows
				// travel as typed arrays (odd's array columns send it to VALUES).
				`CREATE TABLE plain ("Key" int PRIMARY KEY, t text, n numeric(8,2), ts timestamptz, ok bool, u uuid,
					b bytea, j jsonb, d pos, m "Other"."Mood", c char(4), v varchar(12))`,
				// A composite column: with --binary, VALUES again.
				`CREATE DOMAIN pairs AS pair`,
				`CREATE TABLE withpair ("Key" int PRIMARY KEY, pr pair, pd pairs)`,
			)
			h.source(`CREATE PUBLICATION pub FOR TABLE odd, plain, withpair`)
			slot := "rows"
			if binary {
				slot = "rowsbin"
			}
			h.createSlot(slot)
			h.source(`BEGIN;
				INSERT INTO odd SELECT i,
					CASE i % 7 WHEN 0 THEN 'quote " and \ backslash' WHEN 1 THEN '{braces},commas' WHEN 2 THEN 'NULL'
						WHEN 3 THEN '' WHEN 4 THEN NULL WHEN 5 THEN E'tab\tnew\nline' ELSE 'plain ' || i END,
					CASE WHEN i % 5 = 0 THEN NULL ELSE ARRAY[i, NULL, -i] END,
					ARRAY['a"b', 'c\d', NULL, '', 'NULL', '{x}'],
					box(point(i, i), point(0, 0)),
					ROW(i, 'p"q,' || i)::pair,
					i,
					(ARRAY['ok', 'not "ok"', 'a,b']::"Other"."Mood"[])[1 + i % 3],
					decode('00ff5c22' || lpad(to_hex(i), 4, '0'), 'hex'),
					jsonb_build_object('k"', i, 'a', jsonb_build_array('x\y', NULL)),
					i / 3.0, left('c' || i, 4), NULL
				FROM generate_series(1, 300) i;
				UPDATE odd SET big = repeat('z', 300000) WHERE "Key" = 7;
				INSERT INTO plain SELECT i,
					CASE i % 4 WHEN 0 THEN 'quote " \ {x},y' WHEN 1 THEN NULL WHEN 2 THEN '' ELSE 'ü ' || i END,
					i / 7.0, timestamptz '2020-02-29 12:34:56.789+00' + i * interval '1 hour', i % 2 = 0,
					md5(i::text)::uuid, decode(lpad(to_hex(i), 6, '0') || '00', 'hex'),
					jsonb_build_object('k', i, 's', 'a"b'), i, (ARRAY['ok', 'not "ok"', 'a,b']::"Other"."Mood"[])[1 + i % 3],
					left('c' || i, 4), 'v' || i
				FROM generate_series(1, 300) i;
				INSERT INTO withpair SELECT i, ROW(i, 'x"' || i)::pair, ROW(-i, NULL)::pair FROM generate_series(1, 50) i;
				COMMIT;`)
			cfg := h.config(slot, "pub")
			cfg.Binary = binary
			rec := &recorder{}
			cfg.Observer = rec
			stop := h.runApplier(cfg)
			h.waitCaughtUp(slot, time.Minute)
			h.source(`BEGIN;
				UPDATE odd SET "t, x" = '"' || "t, x" || '\', ia = ia || 7, ta = ta || '}{'::text WHERE "Key" % 3 = 0;
				UPDATE odd SET m = 'a,b', j = '{"q": "\""}' WHERE "Key" % 4 = 1;
				DELETE FROM odd WHERE "Key" % 10 = 0;
				INSERT INTO odd ("Key", "t, x") VALUES (1000, 'late "one"'), (1001, NULL), (1002, '');
				UPDATE plain SET t = t || '!', ts = ts + interval '1 day', j = NULL WHERE "Key" % 3 = 0;
				DELETE FROM plain WHERE "Key" % 10 = 1;
				INSERT INTO plain ("Key", t, m) VALUES (1000, 'new', 'a,b');
				COMMIT;`)
			h.waitCaughtUp(slot, time.Minute)
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			h.compare(`SELECT r::text FROM (SELECT "Key", "t, x", "t, x" IS NULL, ia, ta, bx::text, pr, d, m, b, j, n, c, md5(big)
				FROM odd ORDER BY "Key") r`)
			h.compare(`SELECT r::text FROM (SELECT * FROM plain ORDER BY "Key") r`)
			h.compare(`SELECT r::text FROM (SELECT * FROM withpair ORDER BY "Key") r`)
			// Compacted: odd's update of row 7 folds into its insert, the
			// two updates of a row into one, an update and a delete into
			// the delete (uncompacted: 654, 276, 60).
			if got, want := written(rec), (rowCounts{654, 230, 60}); got != want {
				t.Errorf("rows written: %+v, want the net effect %+v", got, want)
			}
		}
	})
}
