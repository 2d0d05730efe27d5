package compact

import (
	"fmt"
	"testing"

	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/protocol"
)

// TestMultiRowSQL pins the SQL of the multi-row statements a write-out
// queues: the VALUES and array forms, a key column with its own equality
// operator, and the missing-row search of UPDATE and DELETE, recorded or
// raised.
func TestMultiRowSQL(t *testing.T) {
	// Source columns id (the key), v, g (generated on the target: never
	// written); target column "Id" compares with an operator in schema s.
	e := &relmap.Entry{
		Rel:  &protocol.Relation{Namespace: "public", Name: "t", Columns: []protocol.RelationColumn{{Name: "id"}, {Name: "v"}, {Name: "g"}}},
		Tcol: []int{0, 1, -1}, Key: []int{0},
		Target: &relmap.Table{Quoted: `"public"."t"`, Columns: []relmap.Column{
			{Name: "Id", TypeOID: 23, CastType: "integer", EqSchema: "s"},
			{Name: "v", TypeOID: 25, CastType: "text"},
		}},
	}
	tests := []struct {
		name, got, want string
		oids, wantOIDs  []uint32
	}{
		{name: "insert, VALUES", want: `INSERT INTO "public"."t" ("Id", "v") OVERRIDING SYSTEM VALUE VALUES ($1, $2), ($3, $4)`,
			wantOIDs: []uint32{23, 25, 23, 25}},
		{name: "insert, arrays", want: `INSERT INTO "public"."t" ("Id", "v") OVERRIDING SYSTEM VALUE SELECT _a.c1::integer AS column1, _a.c2::text AS column2 FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[]), pg_catalog.unnest($2::pg_catalog.text[])) AS _a(c1, c2)`,
			wantOIDs: []uint32{TextArrayOID, TextArrayOID}},
		{name: "update, no search", want: `UPDATE "public"."t" AS _t SET "v" = _v.column2 FROM (VALUES ($1, $2), ($3, $4)) AS _v WHERE _t."Id" OPERATOR("s".=) _v.column1`,
			wantOIDs: []uint32{23, 25, 23, 25}},
		{name: "update, missing recorded", want: `WITH _w AS (UPDATE "public"."t" AS _t SET "v" = _v.column2 FROM (VALUES ($1, $2, $3), ($4, $5, $6)) AS _v WHERE _t."Id" OPERATOR("s".=) _v.column1 RETURNING 1) INSERT INTO walapply.conflicts (applier, kind, relation, key, source_xid, commit_lsn, resolution) SELECT $7, 'update_missing', $8, _v.column3, $10, $11::pg_catalog.pg_lsn, 'skipped' FROM (VALUES ($1, $2, $3), ($4, $5, $6)) AS _v WHERE (SELECT pg_catalog.count(*) FROM _w) < 2 AND NOT EXISTS (SELECT 1 FROM "public"."t" AS _t WHERE _t."Id" OPERATOR("s".=) _v.column1) RETURNING key`,
			wantOIDs: []uint32{23, 25, 25, 23, 25, 25, 25, 25, 25, 20, 25}},
		{name: "delete, missing raised", want: `WITH _w AS (DELETE FROM "public"."t" AS _t USING (SELECT _a.c1::integer AS column1, _a.c2::pg_catalog.text AS column2 FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[]), pg_catalog.unnest($2::pg_catalog.text[])) AS _a(c1, c2)) AS _v WHERE _t."Id" OPERATOR("s".=) _v.column1 RETURNING 1) SELECT walapply.conflict_error('delete_missing', $4, string_agg(_v.column2, '; ')) FROM (SELECT _a.c1::integer AS column1, _a.c2::pg_catalog.text AS column2 FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[]), pg_catalog.unnest($2::pg_catalog.text[])) AS _a(c1, c2)) AS _v WHERE (SELECT pg_catalog.count(*) FROM _w) < pg_catalog.cardinality($1) AND NOT EXISTS (SELECT 1 FROM "public"."t" AS _t WHERE _t."Id" OPERATOR("s".=) _v.column1) HAVING pg_catalog.count(*) > 0`,
			wantOIDs: []uint32{TextArrayOID, TextArrayOID, 25, 25, 25, 20, 25}},
	}
	tests[0].got, tests[0].oids = InsertSQL(e, []int{0, 1}, false, 2, nil)
	tests[1].got, tests[1].oids = InsertSQL(e, []int{0, 1}, true, 500, nil)
	tests[2].got, tests[2].oids = UpdateSQL(e, []int{1}, "", false, false, 2, 2, nil)
	tests[3].got, tests[3].oids = UpdateSQL(e, []int{1}, "update_missing", false, false, 3, 2, nil)
	tests[4].got, tests[4].oids = DeleteSQL(e, "delete_missing", true, true, 2, 500, nil)
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, tt.got, tt.want)
		}
		if fmt.Sprint(tt.oids) != fmt.Sprint(tt.wantOIDs) {
			t.Errorf("%s: parameter types %v, want %v", tt.name, tt.oids, tt.wantOIDs)
		}
	}
}
