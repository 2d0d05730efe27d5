package apply_test

import (
	"testing"
	"time"

	"github.com/walapply/walapply/testenv"
)

// TestCompactionRowSources applies multi-row INSERT, UPDATE and DELETE
// statements whose values travel in text[] parameters (compact_rows.go),
// with the values that are hard to carry that way: quotes, backslashes,
// braces, commas, the word NULL, empty strings and real NULLs, arrays
// (which must not be flattened), a type whose array delimiter is ';', a
// composite, a domain, an enum and a type in another schema, bytea, json,
// and quoted column names; then again with --binary, where the VALUES
// form is used.
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
			)
			h.source(`CREATE PUBLICATION pub FOR TABLE odd`)
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
				COMMIT;`)
			cfg := h.config(slot, "pub")
			cfg.Binary = binary
			stop := h.runApplier(cfg)
			h.waitCaughtUp(slot, time.Minute)
			h.source(`BEGIN;
				UPDATE odd SET "t, x" = '"' || "t, x" || '\', ia = ia || 7, ta = ta || '}{'::text WHERE "Key" % 3 = 0;
				UPDATE odd SET m = 'a,b', j = '{"q": "\""}' WHERE "Key" % 4 = 1;
				DELETE FROM odd WHERE "Key" % 10 = 0;
				INSERT INTO odd ("Key", "t, x") VALUES (1000, 'late "one"'), (1001, NULL), (1002, '');
				COMMIT;`)
			h.waitCaughtUp(slot, time.Minute)
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			h.compare(`SELECT r::text FROM (SELECT "Key", "t, x", "t, x" IS NULL, ia, ta, bx::text, pr, d, m, b, j, n, c, md5(big)
				FROM odd ORDER BY "Key") r`)
		}
	})
}
