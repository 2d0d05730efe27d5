package apply_test

import (
	"strings"
	"testing"
	"time"

	"github.com/walapply/walapply/testenv"
)

// ddlMigration is a migration file as golang-migrate and similar tools
// send it: one simple query holding DDL and data statements, a COMMIT in
// the middle, DDL on a temporary table at the top level and inside a DO
// block (neither replayed; the one inside is not counted), a comment
// with a semicolon, and many statements that are only counted.
var ddlMigration = `CREATE TABLE a (id int PRIMARY KEY, v text);
INSERT INTO a VALUES (1, 'x'), (2, 'y; z');
CREATE TEMP TABLE tmp (i int);
DO $$BEGIN EXECUTE 'CREATE TEMP TABLE tmp_in_do (i int)'; END$$;
-- add x; index it
ALTER TABLE t ADD COLUMN x int;
CREATE INDEX ON t (x);
CREATE TEMP TABLE tmp2 (i int);
UPDATE t SET x = id * 10;
COMMIT;
ALTER TABLE t ADD COLUMN y text DEFAULT 'd';
INSERT INTO t (id, x) VALUES (100, 1000);
DROP TABLE IF EXISTS nosuch;
COMMENT ON COLUMN t.x IS 'x; ten times id';
` + ddlMarks + `
ALTER TABLE t ADD COLUMN z int;`

// ddlMarks are statements that are counted, not replicated: more of them
// than the applier keeps before it verifies them.
var ddlMarks = strings.Repeat("CREATE TEMP TABLE IF NOT EXISTS tmp (i int);\n", 20)

// TestDDLMigrationString: several DDL statements in one query string,
// run during replication under a FOR ALL TABLES publication and a FOR
// TABLE one, are each applied at their place; the tables and their
// definitions are equal afterwards.
func TestDDLMigrationString(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		requireDDLVersions(t, version)
		for _, pub := range []string{"FOR ALL TABLES", "FOR TABLE t"} {
			t.Run(pub, func(t *testing.T) {
				h := newHarness(t, version, nil, nil)
				h.both(`CREATE TABLE t (id int PRIMARY KEY, v int)`)
				h.source(`INSERT INTO t SELECT g, g FROM generate_series(1, 5) g`, `CREATE PUBLICATION pub `+pub)
				h.target(`INSERT INTO t SELECT g, g FROM generate_series(1, 5) g`)
				h.installDDL()
				cfg, logs := h.ddlConfig("mslot", "off", "pub")
				h.runApplier(cfg)
				h.waitStreaming("mslot")
				src := h.conn(true)
				if _, err := src.PgConn().Exec(h.ctx, ddlMigration).ReadAll(); err != nil { // simple protocol
					t.Fatal(err)
				}
				h.source(`INSERT INTO t (id, x, y) VALUES (101, 1, 'after')`)
				h.waitCaughtUp("mslot", time.Minute)
				h.compare(tableRows("t", ""))
				tables := []string{"public.t"}
				if pub == "FOR ALL TABLES" {
					h.compare(tableRows("a", ""))
					tables = append(tables, "public.a")
				} else if h.scalar(false, `SELECT count(*)::text FROM pg_class WHERE relname = 'a'`) != "0" {
					t.Errorf("a table no publication includes was created on the target")
				}
				h.compareSchemas(tables...)
				if got := h.scalar(false, `SELECT col_description('t'::regclass, 2 + 1)`); got != "x; ten times id" {
					t.Errorf("the comment on t.x on the target: %q", got)
				}
				if n := logs.Count("applied captured DDL"); n != 5+map[bool]int{true: 1}[pub == "FOR ALL TABLES"] {
					t.Errorf("%d statements applied", n)
				}
			})
		}
	})
}
