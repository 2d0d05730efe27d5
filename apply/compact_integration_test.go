package apply_test

import (
	"strings"
	"testing"
	"time"

	"github.com/walapply/walapply/testenv"
)

// TestCompaction drives the net-effect paths of group commit: rows
// inserted, updated, deleted and re-inserted within one group, unchanged
// TOAST values, key changes, TRUNCATE in the middle, a table with a second
// unique index (not compacted), and tables compared afterwards.
func TestCompaction(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, nil)
		h.both(
			`CREATE TABLE kv (k int PRIMARY KEY, v text, big text)`,
			`ALTER TABLE kv ALTER COLUMN big SET STORAGE EXTERNAL`,
			`CREATE TABLE two (k int PRIMARY KEY, email text UNIQUE)`,
			`CREATE TABLE comp (a int, b text, v int, PRIMARY KEY (a, b))`,
		)
		h.source(`CREATE PUBLICATION pub FOR TABLE kv, two, comp`)
		h.createSlot("net")
		big := strings.Repeat("y", 200000)
		// One source transaction: one group, whatever the timing.
		h.source(`BEGIN;
			INSERT INTO kv SELECT i, 'v' || i, NULL FROM generate_series(1, 2000) i;
			UPDATE kv SET v = v || '-u1' WHERE k % 2 = 0;
			UPDATE kv SET v = v || '-u2' WHERE k % 4 = 0;
			DELETE FROM kv WHERE k % 5 = 0;
			INSERT INTO kv SELECT i, 'again' || i, NULL FROM generate_series(5, 2000, 10) i;
			UPDATE kv SET big = '` + big + `' WHERE k = 7;
			UPDATE kv SET v = 'after toast' WHERE k = 7;
			UPDATE kv SET k = k + 100000 WHERE k = 9;
			UPDATE kv SET v = 'moved' WHERE k = 100009;
			INSERT INTO two VALUES (1, 'a@x'), (2, 'b@x');
			UPDATE two SET email = 'c@x' WHERE k = 1;
			UPDATE two SET email = 'a@x' WHERE k = 2;
			INSERT INTO comp SELECT i % 10, 'b' || (i / 10), i FROM generate_series(1, 300) i;
			UPDATE comp SET v = -v WHERE a = 3;
			DELETE FROM comp WHERE b = 'b7';
			COMMIT;`)
		// Rows existing before the group, then changed within one.
		rec := &recorder{}
		cfg := h.config("net", "pub")
		cfg.Observer = rec
		stop := h.runApplier(cfg)
		h.waitCaughtUp("net", time.Minute)
		h.source(`BEGIN;
			UPDATE kv SET v = 'x' WHERE k <= 100;
			DELETE FROM kv WHERE k BETWEEN 50 AND 60;
			INSERT INTO kv VALUES (55, 'back', NULL);
			UPDATE kv SET v = 'y' WHERE k = 55;
			TRUNCATE two;
			INSERT INTO two VALUES (3, 'a@x');
			UPDATE kv SET v = 'z' WHERE k = 7;
			DELETE FROM comp WHERE a = 1;
			COMMIT;`)
		// An update of a row missing on the target is still logged and
		// skipped, also inside a multi-row statement.
		h.waitCaughtUp("net", time.Minute)
		h.target(`DELETE FROM kv WHERE k = 1`)
		h.source(`UPDATE kv SET v = 'gone' WHERE k IN (1, 2)`, `DELETE FROM comp WHERE a = 2`)
		h.waitCaughtUp("net", time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		h.target(`INSERT INTO kv SELECT k, v, big FROM (VALUES (1, 'gone', NULL::text)) s(k, v, big)`)
		h.compare(tableRows("kv", "k, v, md5(big)"))
		h.compare(tableRows("two", ""))
		h.compare(tableRows("comp", ""))
		// The net effect is what reached the target; without compaction
		// every change of the source is (2504, 1629, 477).
		if got, want := written(rec), (rowCounts{2094, 87, 67}); got != want {
			t.Errorf("rows written: %+v, want the net effect %+v", got, want)
		}
	})
}

// rowCounts are the rows the applier wrote to the target (Stats' Inserts,
// Updates and Deletes).
type rowCounts struct{ Inserts, Updates, Deletes int64 }

// written sums the rows written over the sessions rec observed.
func written(rec *recorder) rowCounts {
	var c rowCounts
	for _, s := range rec.stats {
		c.Inserts += s.Inserts.Load()
		c.Updates += s.Updates.Load()
		c.Deletes += s.Deletes.Load()
	}
	return c
}
