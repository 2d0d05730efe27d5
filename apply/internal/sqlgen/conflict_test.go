package sqlgen

import (
	"strings"
	"testing"
)

// TestConflictSQL pins the self-recording forms of a change: each policy's
// wrapper around the base statement and the record parameters it numbers.
func TestConflictSQL(t *testing.T) {
	const rec = `INSERT INTO walapply.conflicts (applier, kind, relation, key, source_xid, commit_lsn, resolution) SELECT `
	upd := `UPDATE "t" SET "a" = $1 WHERE "id" = $2`
	ins := `INSERT INTO "t" ("id", "a") OVERRIDING SYSTEM VALUE VALUES ($1, $2)`
	var raise, recMany strings.Builder
	RaiseInstead(&raise, "update_missing", 4, "string_agg(k, '; ')")
	RecordInsert(&recMany, "delete_missing", "skipped", 4, "k")
	tests := []struct {
		name, got, want string
	}{
		{"missing skip", WrapMissing(upd, "update_missing", 3, false),
			`WITH _w AS (` + upd + ` RETURNING 1) ` + rec + `$3, 'update_missing', $4, $5, $6, $7::pg_catalog.pg_lsn, 'skipped' WHERE NOT EXISTS (SELECT 1 FROM _w) RETURNING key`},
		{"missing error", WrapMissing(`DELETE FROM "t" WHERE "id" = $1`, "delete_missing", 2, true),
			`WITH _w AS (DELETE FROM "t" WHERE "id" = $1 RETURNING 1) SELECT walapply.conflict_error('delete_missing', $3, $4) WHERE NOT EXISTS (SELECT 1 FROM _w)`},
		{"update apply", WrapUpdateApply(upd, "update_missing", `"t"`, []string{`"id"`, `"a"`}, 1, 3),
			`WITH _w AS (` + upd + ` RETURNING 1), _i AS (INSERT INTO "t" ("id", "a") SELECT $1, $2 WHERE NOT EXISTS (SELECT 1 FROM _w) RETURNING 1) ` + rec + `$3, 'update_missing', $4, $5, $6, $7::pg_catalog.pg_lsn, 'applied' FROM _i RETURNING key`},
		{"insert skip", WrapInsert(ins, "insert_exists", false, []string{`"id"`}, []string{`"id"`, `"a"`}, 3),
			`WITH _w AS (` + ins + ` ON CONFLICT DO NOTHING RETURNING 1) ` + rec + `$3, 'insert_exists', $4, $5, $6, $7::pg_catalog.pg_lsn, 'skipped' WHERE NOT EXISTS (SELECT 1 FROM _w) RETURNING key`},
		{"insert apply", WrapInsert(ins, "insert_exists", true, []string{`"id"`}, []string{`"id"`, `"a"`}, 3),
			`WITH _w AS (` + ins + ` ON CONFLICT ("id") DO UPDATE SET "id" = EXCLUDED."id", "a" = EXCLUDED."a" RETURNING xmax <> 0 AS _c) ` + rec + `$3, 'insert_exists', $4, $5, $6, $7::pg_catalog.pg_lsn, 'applied' FROM _w WHERE _w._c RETURNING key`},
		{"raise many", raise.String(), `SELECT walapply.conflict_error('update_missing', $5, string_agg(k, '; '))`},
		{"record many", recMany.String(), rec + `$4, 'delete_missing', $5, k, $7, $8::pg_catalog.pg_lsn, 'skipped'`},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, tc.got, tc.want)
		}
	}
	if len(RecordOIDs) != 5 {
		t.Errorf("RecordOIDs has %d types, want the five record parameters", len(RecordOIDs))
	}
}
