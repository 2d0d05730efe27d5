package apply_test

import (
	"testing"
	"time"

	"github.com/walapply/walapply/testenv"
)

// TestIdentityAlwaysTarget: source values go into target identity columns
// defined GENERATED ALWAYS, as PostgreSQL's subscriber writes them: on the
// per-row path (a table with a second unique index is not compacted), in a
// multi-row INSERT (a short run in a group) and by COPY (a long one), for
// an identity key and an identity column beside the key.
func TestIdentityAlwaysTarget(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, nil)
		h.both(`CREATE TABLE idk (id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v text)`,
			`CREATE TABLE idc (k int PRIMARY KEY, seq bigint GENERATED ALWAYS AS IDENTITY, v text)`,
			`CREATE TABLE idu (id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY, email text UNIQUE)`)
		// The target's sequences start elsewhere: only replicated values
		// can make the rows equal.
		h.target(`ALTER TABLE idk ALTER COLUMN id RESTART WITH 5000`, `ALTER TABLE idc ALTER COLUMN seq RESTART WITH 5000`,
			`ALTER TABLE idu ALTER COLUMN id RESTART WITH 5000`)
		h.source(`CREATE PUBLICATION pub FOR TABLE idk, idc, idu`)
		h.createSlot("idt")
		h.source(`INSERT INTO idk (v) SELECT 'short ' || i FROM generate_series(1, 10) i`,
			`INSERT INTO idk (v) SELECT 'long ' || i FROM generate_series(1, 200) i`,
			`INSERT INTO idc (k, v) SELECT i, 'short' FROM generate_series(1, 5) i`,
			`INSERT INTO idc (k, v) SELECT i, 'long' FROM generate_series(6, 205) i`,
			`INSERT INTO idu (email) SELECT i || '@x' FROM generate_series(1, 20) i`)
		stop := h.runApplier(h.config("idt", "pub"))
		h.waitCaughtUp("idt", time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		for table, n := range map[string]int{"idk": 210, "idc": 205, "idu": 20} {
			if got := h.compare(tableRows(table, "")); got != n {
				t.Errorf("%s: %d rows, want %d", table, got, n)
			}
		}
	})
}
