package apply

import "testing"

// The row digest's SQL: values where the type is value-hashed and the same
// on both sides, text-like ones in "C", the text form for every other
// column; the whole row's md5 where a side predates hash_record_extended.
func TestRowDigest(t *testing.T) {
	cols := []string{"id", "Name", "tags", "j", "mood", "n", "gone"}
	src := []string{"integer", "text", "character varying[]", "json", "mood", "numeric", "uuid"}
	dst := map[string]string{"id": "integer", "Name": "text", "tags": "character varying[]", "j": "json", "mood": "mood", "n": "bigint"}
	for _, c := range []struct {
		name   string
		hashed bool
		want   string
	}{
		{"hashed", true, `pg_catalog.hash_record_extended(ROW("id", "Name" COLLATE "C", "tags" COLLATE "C", ("j")::text COLLATE "C", ("mood")::text COLLATE "C", ("n")::text COLLATE "C", ("gone")::text COLLATE "C"), 0)`},
		{"text", false, `('x' || substr(pg_catalog.md5(ROW("id", "Name", "tags", "j", "mood", "n", "gone")::text), 1, 16))::bit(64)::bigint`},
	} {
		if got := rowDigest(cols, src, dst, c.hashed); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}
