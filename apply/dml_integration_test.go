package apply_test

import (
	"strings"
	"testing"
	"time"

	"github.com/walapply/walapply/testenv"
)

// TestApplyDML replays every DML path onto a real target and compares.
func TestApplyDML(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, nil)
		schema := []string{
			`CREATE TABLE pk (id int PRIMARY KEY, val text, n numeric)`,
			`CREATE TABLE idx (a int NOT NULL, b text NOT NULL, c text)`,
			`CREATE UNIQUE INDEX idx_ab ON idx (a, b)`,
			`ALTER TABLE idx REPLICA IDENTITY USING INDEX idx_ab`,
			`CREATE TABLE full_t (a int, j json, p point, t text)`,
			`ALTER TABLE full_t REPLICA IDENTITY FULL`,
			`CREATE TABLE nothing_t (a int, b text)`,
			`ALTER TABLE nothing_t REPLICA IDENTITY NOTHING`,
			`CREATE TABLE toast_t (id int PRIMARY KEY, big text, small int)`,
			`ALTER TABLE toast_t ALTER COLUMN big SET STORAGE EXTERNAL`,
			`CREATE TABLE parent_t (id int PRIMARY KEY)`,
			`CREATE TABLE child_t (id int PRIMARY KEY, parent int REFERENCES parent_t(id))`,
			`CREATE TABLE seq_t (id serial PRIMARY KEY, v text)`,
			`CREATE TABLE part (id int, region text, v int, PRIMARY KEY (id, region)) PARTITION BY LIST (region)`,
			`CREATE TABLE part_eu PARTITION OF part FOR VALUES IN ('eu')`,
			`CREATE TABLE part_us PARTITION OF part FOR VALUES IN ('us')`,
			`CREATE TABLE rootpart (id int PRIMARY KEY, v int) PARTITION BY RANGE (id)`,
			`CREATE TABLE rootpart_1 PARTITION OF rootpart FOR VALUES FROM (0) TO (100)`,
			`CREATE TABLE rootpart_2 PARTITION OF rootpart FOR VALUES FROM (100) TO (200)`,
			`CREATE TABLE evolve (id int PRIMARY KEY, a text)`,
		}
		h.both(schema...)
		// Target differences the applier must cope with: another column
		// order, extra columns with defaults, a generated column, and for
		// rootpart another partitioning altogether.
		h.target(
			`DROP TABLE pk`,
			`CREATE TABLE pk (extra text DEFAULT 'dflt', n numeric, val text, id int PRIMARY KEY, twice int GENERATED ALWAYS AS (id * 2) STORED)`,
			`DROP TABLE rootpart`,
			`CREATE TABLE rootpart (id int PRIMARY KEY, v int)`,
		)
		h.source(
			`CREATE PUBLICATION pub FOR TABLE pk, idx, full_t, nothing_t, toast_t, parent_t, child_t, seq_t, part, evolve`,
			`CREATE PUBLICATION pubroot FOR TABLE rootpart WITH (publish_via_partition_root = true)`,
		)
		h.createSlot("dml")
		stop := h.runApplier(h.config("dml", "pub", "pubroot"))

		big := strings.Repeat("x", 300000)
		h.source(
			`INSERT INTO pk VALUES (1, 'one', 1.5), (2, 'two', NULL), (3, 'three', 'NaN')`,
			`UPDATE pk SET val = 'uno' WHERE id = 1`,
			`UPDATE pk SET id = 20 WHERE id = 2`, // key change: old key 'K'
			`DELETE FROM pk WHERE id = 3`,
			`INSERT INTO idx VALUES (1, 'a', 'x'), (1, 'b', 'y')`,
			`UPDATE idx SET c = 'z' WHERE a = 1 AND b = 'a'`,
			`UPDATE idx SET b = 'c' WHERE a = 1 AND b = 'b'`,
			`INSERT INTO full_t VALUES (1, '{"a": 1}', '(1,2)', 'dup'), (1, '{"a": 1}', '(1,2)', 'dup'), (2, NULL, NULL, NULL)`,
			`UPDATE full_t SET t = 'changed' WHERE ctid = (SELECT min(ctid) FROM full_t WHERE a = 1)`,
			`DELETE FROM full_t WHERE a = 2`,
			`INSERT INTO nothing_t VALUES (1, 'only inserts')`,
			`INSERT INTO toast_t VALUES (1, '`+big+`', 0)`,
			`UPDATE toast_t SET small = 1 WHERE id = 1`, // big is sent as unchanged TOAST
			`INSERT INTO parent_t VALUES (1), (2)`,
			`INSERT INTO child_t VALUES (1, 1)`,
			`INSERT INTO seq_t (v) VALUES ('a'), ('b')`,
			`INSERT INTO part VALUES (1, 'eu', 1), (2, 'us', 2)`,
			`UPDATE part SET v = 10 WHERE id = 1`,
			`DELETE FROM part WHERE id = 2`,
			`INSERT INTO rootpart VALUES (1, 1), (150, 2)`,
			`UPDATE rootpart SET v = 3 WHERE id = 150`,
			`INSERT INTO evolve VALUES (1, 'before')`,
		)
		h.waitCaughtUp("dml", time.Minute)
		h.compare(tableRows("pk", "id, val, n"))
		h.expect(tableRows("pk", "id, extra, twice"), "(1,dflt,2)", "(20,dflt,40)")
		h.compare(tableRows("idx", ""))
		h.compare(tableRows("full_t", "a, j::text, p::text, t"))
		h.compare(tableRows("nothing_t", ""))
		h.compare(tableRows("toast_t", "id, md5(big), small"))
		h.compare(tableRows("part", ""))
		h.compare(tableRows("part_eu", ""))
		h.compare(tableRows("rootpart", ""))

		// A relation that changes mid-stream: a column added (on the target
		// first), one dropped (on the source first; the target keeps it as
		// an extra column until the change has replicated).
		h.target(`ALTER TABLE evolve ADD COLUMN b int`)
		h.source(`ALTER TABLE evolve ADD COLUMN b int`)
		h.source(`INSERT INTO evolve VALUES (2, 'after add', 2)`, `UPDATE evolve SET b = 1 WHERE id = 1`)
		h.source(`ALTER TABLE evolve DROP COLUMN a`)
		h.source(`INSERT INTO evolve VALUES (3, 3)`, `UPDATE evolve SET b = 4 WHERE id = 2`)
		h.waitCaughtUp("dml", time.Minute)
		h.expect(tableRows("evolve", ""), "(1,before,1)", "(2,\"after add\",4)", "(3,,3)")
		h.target(`ALTER TABLE evolve DROP COLUMN a`)
		// TRUNCATE of several tables, CASCADE and RESTART IDENTITY.
		h.source(`TRUNCATE parent_t, seq_t RESTART IDENTITY CASCADE`, `INSERT INTO seq_t (v) VALUES ('restarted')`)
		h.waitCaughtUp("dml", time.Minute)
		h.compare(tableRows("evolve", ""))
		h.expect(tableRows("parent_t", ""))
		h.expect(tableRows("child_t", ""))
		h.expect(tableRows("seq_t", ""), "(1,restarted)")

		if err := stop(); err != nil {
			t.Fatalf("applier: %v", err)
		}
	})
}
