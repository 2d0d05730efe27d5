package bench

import (
	"fmt"
	"strings"
)

// mixedTables is the number of tables of the mixed workload.
const mixedTables = 50

// mixedType is a column type of the mixed workload and the SQL expression
// that derives a value of it from the bigint parameter $2.
type mixedType struct {
	sql  string
	expr string
}

// mixedTypes covers the common scalar, text, temporal, binary, JSON, array
// and network types, so that both appliers meet their text forms.
var mixedTypes = []mixedType{
	{"int", `($2 % 100000)::int`},
	{"bigint", `$2 * 7919`},
	{"smallint", `($2 % 30000)::smallint`},
	{"text", `md5($2::text)`},
	{"varchar(40)", `left(md5($2::text), 20)`},
	{"numeric(12,3)", `(($2 % 1000000) / 7.0)::numeric(12,3)`},
	{"double precision", `$2 / 3.0::float8`},
	{"real", `(($2 % 1000) / 7.0)::real`},
	{"boolean", `$2 % 2 = 0`},
	{"date", `date '2020-01-01' + ($2 % 3000)::int`},
	{"timestamptz", `timestamptz '2020-01-01 00:00:00+00' + $2 * interval '1 second'`},
	{"timestamp", `timestamp '2020-01-01 00:00:00' + $2 * interval '1 minute'`},
	{"uuid", `md5($2::text)::uuid`},
	{"jsonb", `jsonb_build_object('k', $2, 's', md5($2::text))`},
	{"json", `json_build_object('k', $2)`},
	{"bytea", `decode(md5($2::text), 'hex')`},
	{"int[]", `ARRAY[$2::int, ($2 + 1)::int, ($2 + 2)::int]`},
	{"text[]", `ARRAY[md5($2::text), 'x y', NULL]`},
	{"interval", `($2 % 86400) * interval '1 second'`},
	{"inet", `('10.' || ($2 % 256) || '.' || ($2 / 256 % 256) || '.1')::inet`},
	{"char(8)", `left(md5($2::text), 8)`},
}

// mixedColumns returns the column types of table i: 3 to 6 of
// mixedTypes, a different selection per table.
func mixedColumns(i int) []mixedType {
	n := 3 + i%4
	cols := make([]mixedType, n)
	for j := range cols {
		cols[j] = mixedTypes[(i+j*7)%len(mixedTypes)]
	}
	return cols
}

func mixedTable(i int) string { return fmt.Sprintf("mixed_%02d", i+1) }

// mixedValue is column j's value expression, NULL for one key in ten in
// every third column so that NULLs travel too.
func mixedValue(j int, t mixedType) string {
	if j%3 == 2 {
		return fmt.Sprintf(`CASE WHEN $2 %% 10 = 3 THEN NULL ELSE %s END`, t.expr)
	}
	return t.expr
}

// mixedSchema creates the tables of the mixed workload.
func mixedSchema() []string {
	stmts := make([]string, mixedTables)
	for i := range stmts {
		var b strings.Builder
		fmt.Fprintf(&b, "CREATE TABLE %s (id bigint PRIMARY KEY", mixedTable(i))
		for j, c := range mixedColumns(i) {
			fmt.Fprintf(&b, ", c%d %s", j, c.sql)
		}
		b.WriteString(")")
		stmts[i] = b.String()
	}
	return stmts
}

// mixedStatements returns, per table, the INSERT, UPDATE and DELETE run by
// the generator, with the row key as $1 and the value seed as $2.
func mixedStatements(i int) (ins, upd, del string) {
	cols := mixedColumns(i)
	names := []string{"id"}
	values := []string{"$1"}
	var sets []string
	for j, c := range cols {
		names = append(names, fmt.Sprintf("c%d", j))
		values = append(values, mixedValue(j, c))
		if j < 2 {
			sets = append(sets, fmt.Sprintf("c%d = %s", j, mixedValue(j, c)))
		}
	}
	t := mixedTable(i)
	ins = fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", t, strings.Join(names, ", "), strings.Join(values, ", "))
	upd = fmt.Sprintf("UPDATE %s SET %s WHERE id = $1", t, strings.Join(sets, ", "))
	del = fmt.Sprintf("DELETE FROM %s WHERE id = $1", t)
	return ins, upd, del
}

// mixedGenerator returns a DO block that commits txns transactions of 1–5
// statements on random tables: 70% inserts of new keys, 20% updates and
// 10% deletes of random keys inserted before (which may be gone already,
// then the statement changes nothing). The seed is fixed, so the backlog
// is the same in every run.
func mixedGenerator(txns int) string {
	var ins, upd, del []string
	for i := range mixedTables {
		a, b, c := mixedStatements(i)
		ins = append(ins, quoteLiteral(a))
		upd = append(upd, quoteLiteral(b))
		del = append(del, quoteLiteral(c))
	}
	return fmt.Sprintf(`DO $gen$
DECLARE
	ins text[] := ARRAY[%s];
	upd text[] := ARRAY[%s];
	del text[] := ARRAY[%s];
	cnt bigint[] := array_fill(0::bigint, ARRAY[%d]);
	k bigint := 0;
	tab int;
	op float8;
BEGIN
	PERFORM setseed(0.42);
	FOR txn IN 1..%d LOOP
		FOR s IN 1..(1 + floor(random() * 5)::int) LOOP
			tab := 1 + floor(random() * %d)::int;
			k := k + 1;
			op := random();
			IF op < 0.7 OR cnt[tab] = 0 THEN
				cnt[tab] := cnt[tab] + 1;
				EXECUTE ins[tab] USING cnt[tab], k;
			ELSIF op < 0.9 THEN
				EXECUTE upd[tab] USING 1 + floor(random() * cnt[tab])::bigint, k;
			ELSE
				EXECUTE del[tab] USING 1 + floor(random() * cnt[tab])::bigint;
			END IF;
		END LOOP;
		COMMIT;
	END LOOP;
END
$gen$`, strings.Join(ins, ",\n\t\t"), strings.Join(upd, ",\n\t\t"), strings.Join(del, ",\n\t\t"),
		mixedTables, txns, mixedTables)
}

// quoteLiteral quotes s as a standard SQL string literal.
func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
