package sqlgen

import "testing"

func TestBuildSQL(t *testing.T) {
	tbl := QuoteQualified("my schema", `odd"name`)
	id := MatchColumn{Name: QuoteIdent("id")}
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"insert", Insert(tbl, []string{QuoteIdent("id"), QuoteIdent("Val")}),
			`INSERT INTO "my schema"."odd""name" ("id", "Val") OVERRIDING SYSTEM VALUE VALUES ($1, $2)`},
		{"insert no columns", Insert(tbl, nil),
			`INSERT INTO "my schema"."odd""name" DEFAULT VALUES`},
		{"update by key", Update(tbl, []string{`"a"`, `"b"`}, []MatchColumn{id}, false, false),
			`UPDATE "my schema"."odd""name" SET "a" = $1, "b" = $2 WHERE "id" = $3`},
		{"update composite key", Update(tbl, []string{`"a"`}, []MatchColumn{id, {Name: `"k2"`}}, false, false),
			`UPDATE "my schema"."odd""name" SET "a" = $1 WHERE "id" = $2 AND "k2" = $3`},
		{"update nothing to set", Update(tbl, nil, []MatchColumn{id}, false, false),
			`UPDATE "my schema"."odd""name" SET "id" = "id" WHERE "id" = $1`},
		{"update full", Update(tbl, []string{`"a"`}, []MatchColumn{{Name: `"a"`, Nullable: true}, {Name: `"j"`, Nullable: true, TextCompare: true}}, true, false),
			`UPDATE "my schema"."odd""name" SET "a" = $1 WHERE ctid = (SELECT ctid FROM "my schema"."odd""name" WHERE "a" IS NOT DISTINCT FROM $2 AND "j"::text IS NOT DISTINCT FROM $3::text LIMIT 1)`},
		{"update full partitioned", Update(tbl, []string{`"a"`}, []MatchColumn{{Name: `"a"`, Nullable: true}}, true, true),
			`UPDATE "my schema"."odd""name" SET "a" = $1 WHERE (tableoid, ctid) = (SELECT tableoid, ctid FROM "my schema"."odd""name" WHERE "a" IS NOT DISTINCT FROM $2 LIMIT 1)`},
		{"delete by key", Delete(tbl, []MatchColumn{id}, false, false),
			`DELETE FROM "my schema"."odd""name" WHERE "id" = $1`},
		{"delete full", Delete(tbl, []MatchColumn{{Name: `"p"`, Nullable: true, TextCompare: true}}, true, false),
			`DELETE FROM "my schema"."odd""name" WHERE ctid = (SELECT ctid FROM "my schema"."odd""name" WHERE "p"::text IS NOT DISTINCT FROM $1::text LIMIT 1)`},
		{"extension operator", Delete(tbl, []MatchColumn{{Name: `"k"`, OpSchema: "ext"}}, false, false),
			`DELETE FROM "my schema"."odd""name" WHERE "k" OPERATOR("ext".=) $1`},
		{"extension operator full", Delete(tbl, []MatchColumn{{Name: `"h"`, OpSchema: "public", Nullable: true}}, true, false),
			`DELETE FROM "my schema"."odd""name" WHERE ctid = (SELECT ctid FROM "my schema"."odd""name" WHERE ("h" OPERATOR("public".=) $1 OR ("h" IS NULL AND $1 IS NULL)) LIMIT 1)`},
		{"truncate", Truncate([]string{`"s"."a"`, `"s"."p"`}, []bool{true, false}, true, true),
			`TRUNCATE ONLY "s"."a", "s"."p" RESTART IDENTITY CASCADE`},
		{"truncate plain", Truncate([]string{`"s"."a"`}, []bool{true}, false, false),
			`TRUNCATE ONLY "s"."a"`},
		{"quoting", QuoteIdent(`a"b; DROP TABLE x; --`), `"a""b; DROP TABLE x; --"`},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, tc.got, tc.want)
		}
	}
}
