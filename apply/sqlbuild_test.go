package apply

import "testing"

func TestBuildSQL(t *testing.T) {
	tbl := quoteQualified("my schema", `odd"name`)
	id := matchColumn{Name: quoteIdent("id")}
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"insert", buildInsert(tbl, []string{quoteIdent("id"), quoteIdent("Val")}),
			`INSERT INTO "my schema"."odd""name" ("id", "Val") OVERRIDING SYSTEM VALUE VALUES ($1, $2)`},
		{"insert no columns", buildInsert(tbl, nil),
			`INSERT INTO "my schema"."odd""name" DEFAULT VALUES`},
		{"update by key", buildUpdate(tbl, []string{`"a"`, `"b"`}, []matchColumn{id}, false, false),
			`UPDATE "my schema"."odd""name" SET "a" = $1, "b" = $2 WHERE "id" = $3`},
		{"update composite key", buildUpdate(tbl, []string{`"a"`}, []matchColumn{id, {Name: `"k2"`}}, false, false),
			`UPDATE "my schema"."odd""name" SET "a" = $1 WHERE "id" = $2 AND "k2" = $3`},
		{"update nothing to set", buildUpdate(tbl, nil, []matchColumn{id}, false, false),
			`UPDATE "my schema"."odd""name" SET "id" = "id" WHERE "id" = $1`},
		{"update full", buildUpdate(tbl, []string{`"a"`}, []matchColumn{{Name: `"a"`, Nullable: true}, {Name: `"j"`, Nullable: true, TextCompare: true}}, true, false),
			`UPDATE "my schema"."odd""name" SET "a" = $1 WHERE ctid = (SELECT ctid FROM "my schema"."odd""name" WHERE "a" IS NOT DISTINCT FROM $2 AND "j"::text IS NOT DISTINCT FROM $3::text LIMIT 1)`},
		{"update full partitioned", buildUpdate(tbl, []string{`"a"`}, []matchColumn{{Name: `"a"`, Nullable: true}}, true, true),
			`UPDATE "my schema"."odd""name" SET "a" = $1 WHERE (tableoid, ctid) = (SELECT tableoid, ctid FROM "my schema"."odd""name" WHERE "a" IS NOT DISTINCT FROM $2 LIMIT 1)`},
		{"delete by key", buildDelete(tbl, []matchColumn{id}, false, false),
			`DELETE FROM "my schema"."odd""name" WHERE "id" = $1`},
		{"delete full", buildDelete(tbl, []matchColumn{{Name: `"p"`, Nullable: true, TextCompare: true}}, true, false),
			`DELETE FROM "my schema"."odd""name" WHERE ctid = (SELECT ctid FROM "my schema"."odd""name" WHERE "p"::text IS NOT DISTINCT FROM $1::text LIMIT 1)`},
		{"extension operator", buildDelete(tbl, []matchColumn{{Name: `"k"`, OpSchema: "ext"}}, false, false),
			`DELETE FROM "my schema"."odd""name" WHERE "k" OPERATOR("ext".=) $1`},
		{"extension operator full", buildDelete(tbl, []matchColumn{{Name: `"h"`, OpSchema: "public", Nullable: true}}, true, false),
			`DELETE FROM "my schema"."odd""name" WHERE ctid = (SELECT ctid FROM "my schema"."odd""name" WHERE ("h" OPERATOR("public".=) $1 OR ("h" IS NULL AND $1 IS NULL)) LIMIT 1)`},
		{"truncate", buildTruncate([]string{`"s"."a"`, `"s"."p"`}, []bool{true, false}, true, true),
			`TRUNCATE ONLY "s"."a", "s"."p" RESTART IDENTITY CASCADE`},
		{"truncate plain", buildTruncate([]string{`"s"."a"`}, []bool{true}, false, false),
			`TRUNCATE ONLY "s"."a"`},
		{"quoting", quoteIdent(`a"b; DROP TABLE x; --`), `"a""b; DROP TABLE x; --"`},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, tc.got, tc.want)
		}
	}
}

func TestResolveEquality(t *testing.T) {
	const (
		int4 = iota + 1
		json
		int4arr
		jsonarr
		enum
		domainJSON
		int4range
		int4multirange
		compOK
		compBad
		point
	)
	nodes := map[uint32]*typeNode{
		int4:           {typtype: 'b', ownOpclass: true},
		json:           {typtype: 'b'},
		point:          {typtype: 'b'},
		int4arr:        {typtype: 'b', category: 'A', elem: int4},
		jsonarr:        {typtype: 'b', category: 'A', elem: json},
		enum:           {typtype: 'e'},
		domainJSON:     {typtype: 'd', base: json},
		int4range:      {typtype: 'r', rangeSub: int4},
		int4multirange: {typtype: 'm', mrRange: int4range},
		compOK:         {typtype: 'c', attrs: []uint32{int4, enum}},
		compBad:        {typtype: 'c', attrs: []uint32{int4, point}},
	}
	want := map[uint32]bool{int4: true, json: false, point: false, int4arr: true, jsonarr: false, enum: true,
		domainJSON: false, int4range: true, int4multirange: true, compOK: true, compBad: false, 999: false}
	var oids []uint32
	for o := range want {
		oids = append(oids, o)
	}
	got := resolveEquality(nodes, oids)
	for o, w := range want {
		if got[o].has != w {
			t.Errorf("type %d: has equality = %v, want %v", o, got[o].has, w)
		}
	}
	// An extension type's operator lives in the extension's schema; a
	// domain over it uses it too; polymorphic ones are in pg_catalog.
	nodes[100] = &typeNode{typtype: 'b', ownOpclass: true, opSchema: "ext"}
	nodes[101] = &typeNode{typtype: 'd', base: 100}
	nodes[102] = &typeNode{typtype: 'b', category: 'A', elem: 100}
	nodes[int4].opSchema = "pg_catalog"
	got = resolveEquality(nodes, []uint32{100, 101, 102, int4, enum})
	for o, w := range map[uint32]string{100: "ext", 101: "ext", 102: "", int4: "", enum: ""} {
		if got[o].schema != w {
			t.Errorf("type %d: operator schema %q, want %q", o, got[o].schema, w)
		}
	}
}

func TestAppendMask(t *testing.T) {
	for _, tc := range []struct {
		n    int
		bits []int
		want []byte
	}{
		{0, nil, nil},
		{3, []int{0, 2}, []byte{0b101}},
		{8, []int{7}, []byte{0x80}},
		{9, []int{0, 8}, []byte{0x01, 0x01}},
	} {
		set := map[int]bool{}
		for _, b := range tc.bits {
			set[b] = true
		}
		got := appendMask(nil, tc.n, func(i int) bool { return set[i] })
		if string(got) != string(tc.want) {
			t.Errorf("n=%d bits=%v: got %08b want %08b", tc.n, tc.bits, got, tc.want)
		}
	}
}
