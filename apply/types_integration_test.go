package apply_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// typeCase is a column type and values to round-trip through replication.
type typeCase struct {
	typ    string
	values []string // SQL expressions
}

func typeMatrix() []typeCase {
	// Every code point from 1 to 255, then some beyond.
	allChars := "(SELECT string_agg(chr(i), '') FROM generate_series(1, 255) i) || 'é€😀ß'"
	return []typeCase{
		{"smallint", []string{"-32768", "32767", "0"}},
		{"integer", []string{"-2147483648", "2147483647"}},
		{"bigint", []string{"-9223372036854775808", "9223372036854775807"}},
		{"numeric", []string{"'NaN'", "0", "-1.5", "123456789012345678901234567890.123456789012345678901234567890", "1e-300"}},
		{"numeric(10,3)", []string{"3.14159"}},
		{"real", []string{"'Infinity'", "'-Infinity'", "'NaN'", "1.17549435e-38", "3.4028235e+38", "0.1"}},
		{"double precision", []string{"'Infinity'", "'NaN'", "2.2250738585072014e-308", "1.7976931348623157e+308", "0.1"}},
		{"text", []string{allChars, "''", "'with \"quotes\" and \\\\ backslash'"}},
		{"varchar(10)", []string{"'short'"}},
		{"char(5)", []string{"'ab'"}},
		{"bytea", []string{"'\\x00ff10'::bytea", "''::bytea", "decode(repeat('ab', 5000), 'hex')"}},
		{"boolean", []string{"true", "false"}},
		{"date", []string{"'2024-02-29'", "'infinity'", "'-infinity'", "'4713-01-01 BC'"}},
		{"time", []string{"'23:59:59.999999'"}},
		{"timetz", []string{"'12:00:00+05:30'"}},
		{"timestamp", []string{"'2024-01-01 12:34:56.789'", "'infinity'", "'-infinity'"}},
		{"timestamptz", []string{"'2024-01-01 12:34:56.789+02'", "'infinity'"}},
		{"interval", []string{"'1 year 2 mons 3 days 04:05:06.789'", "'-1 day'"}},
		{"uuid", []string{"'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'"}},
		{"inet", []string{"'192.168.0.1/24'", "'::1'"}},
		{"cidr", []string{"'10.0.0.0/8'"}},
		{"macaddr", []string{"'08:00:2b:01:02:03'"}},
		{"json", []string{`'{"b": 1, "a": [1, 2, null]}'`}},
		{"jsonb", []string{`'{"b": 1, "a": [1, 2, null]}'`}},
		{"integer[]", []string{"'{1,NULL,3}'", "'{{1,2},{3,4}}'", "'{}'"}},
		{"text[]", []string{`'{"a b","c,d",NULL,"\"q\""}'`}},
		{"mood", []string{"'happy'", "'sad'"}},
		{"posint", []string{"42"}},
		{"pair", []string{"ROW(1, 'x')::pair", "ROW(NULL, NULL)::pair"}},
		{"int4range", []string{"'[1,10)'", "'empty'"}},
		{"tstzrange", []string{"'[2024-01-01,2024-02-01)'"}},
		{"int4multirange", []string{"'{[1,3),[5,8)}'"}},
		{"money", []string{"'12.34'"}},
		{"bit(4)", []string{"B'1010'"}},
		{"varbit", []string{"B'101'"}},
		{"tsvector", []string{"'a fat cat'::tsvector"}},
		{"point", []string{"'(1.5,2.5)'"}},
		{"xml", []string{"'<a>b</a>'"}},
	}
}

// TestTypeMatrix round-trips values of many types, in text and binary mode,
// and compares source and target.
func TestTypeMatrix(t *testing.T) {
	t.Parallel()
	forEachVersionAndFormat(t, func(t *testing.T, version int, binary bool) {
		h := newHarness(t, version, nil, nil)
		h.both(`CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')`, `CREATE DOMAIN posint AS int CHECK (VALUE > 0)`,
			`CREATE TYPE pair AS (a int, b text)`)
		h.both(`CREATE EXTENSION IF NOT EXISTS hstore`, `CREATE EXTENSION IF NOT EXISTS citext`)
		cases := typeMatrix()
		cases = append(cases, typeCase{"hstore", []string{`'a=>1, "b c"=>NULL'`}}, typeCase{"citext", []string{"'MiXeD'"}})
		// A key whose "=" lives in an extension's schema, not pg_catalog.
		h.both(`CREATE TABLE ci (k citext PRIMARY KEY, v int)`)
		var cols []string
		for i, c := range cases {
			cols = append(cols, fmt.Sprintf("c%d %s", i, c.typ))
		}
		h.both(`CREATE TABLE types (id int PRIMARY KEY, ` + strings.Join(cols, ", ") + `)`)
		h.both(`CREATE TABLE types_full (id int, ` + strings.Join(cols, ", ") + `)`)
		h.source(`ALTER TABLE types_full REPLICA IDENTITY FULL`, `CREATE PUBLICATION pub FOR TABLE types, types_full, ci`)
		h.createSlot("types")
		cfg := h.config("types", "pub")
		cfg.Binary = binary
		stop := h.runApplier(cfg)
		// One row per value position; a NULL row too.
		maxVals := 0
		for _, c := range cases {
			maxVals = max(maxVals, len(c.values))
		}
		for row := 0; row < maxVals; row++ {
			var vals []string
			for _, c := range cases {
				vals = append(vals, c.values[row%len(c.values)])
			}
			for _, tbl := range []string{"types", "types_full"} {
				h.source(fmt.Sprintf("INSERT INTO %s VALUES (%d, %s)", tbl, row, strings.Join(vals, ", ")))
			}
		}
		for _, tbl := range []string{"types", "types_full"} {
			h.source(fmt.Sprintf("INSERT INTO %s (id) VALUES (-1)", tbl))
		}
		// Updates and deletes locate rows by every column under FULL,
		// including json, point and xml, which have no equality.
		h.source(`INSERT INTO ci VALUES ('Abc', 1), ('dEf', 2)`, `UPDATE ci SET v = 3 WHERE k = 'ABC'`, `DELETE FROM ci WHERE k = 'def'`)
		h.source(`UPDATE types_full SET c0 = 1 WHERE id = 0`, `DELETE FROM types_full WHERE id = 1`,
			`UPDATE types SET c1 = 7 WHERE id = 2`, `DELETE FROM types WHERE id = 3`)
		h.waitCaughtUp("types", time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		h.expect(tableRows("ci", ""), "(Abc,3)")
		for i := range cases {
			for _, tbl := range []string{"types", "types_full"} {
				h.compare(fmt.Sprintf("SELECT id::text || ' ' || COALESCE(c%d::text, 'NULL') FROM %s", i, tbl))
			}
		}
	})
}
