package apply_test

import (
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/testenv"
)

// TestDDLDumpAsPlainRole: with the capture installed, a whole-database
// pg_dump of the source by a role that is no superuser and may read the
// application's tables still works (on 15, the only pg_dump here; on the
// others the role reads every table and sequence of walapply_ddl, as
// pg_dump would), and that role still cannot read the capture's key.
func TestDDLDumpAsPlainRole(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		requireDDLVersions(t, version)
		h := newHarness(t, version, nil, nil)
		h.source(`CREATE TABLE app (id int PRIMARY KEY)`, `INSERT INTO app VALUES (1)`,
			`CREATE ROLE backup LOGIN`, `GRANT SELECT ON app TO backup`)
		// Version 1 of the capture kept its key in a table and took no
		// command tag: the upgrade drops both.
		h.source(`CREATE SCHEMA walapply_ddl`, `CREATE TABLE walapply_ddl.secret (key bytea NOT NULL)`,
			`REVOKE ALL ON walapply_ddl.secret FROM PUBLIC`, `INSERT INTO walapply_ddl.secret VALUES ('\x00')`,
			`CREATE FUNCTION walapply_ddl.capture(kind text, path text, role text) RETURNS void LANGUAGE sql AS ''`)
		h.installDDL()
		h.expectOn(true, `SELECT relkind::text FROM pg_class WHERE oid = 'walapply_ddl.secret'::regclass`, "m")
		h.expectOn(true, `SELECT count(*)::text FROM pg_proc WHERE proname = 'capture' AND pronamespace = 'walapply_ddl'::regnamespace`, "1")
		h.source(`ALTER TABLE app ADD COLUMN c int`) // the capture has run once
		url := strings.Replace(h.pair.Source.ConnString("postgres"), "postgres@", "backup@", 1)
		if version == 15 {
			bin, err := testenv.Tool(15, "pg_dump")
			if err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(bin, "-d", url).CombinedOutput()
			if err != nil {
				t.Fatalf("pg_dump as a plain role: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), "COPY public.app") {
				t.Errorf("pg_dump as a plain role: no data of app in\n%s", out)
			}
		}
		conn, err := pgx.Connect(h.ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(h.ctx)
		rels := h.rows(h.pair.Source, `SELECT c.oid::regclass::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = 'walapply_ddl' AND c.relkind IN ('r', 'p', 'S') ORDER BY 1`)
		for _, r := range rels {
			if _, err := conn.PgConn().CopyTo(h.ctx, io.Discard, "COPY "+r+" TO STDOUT"); err != nil {
				t.Errorf("as a plain role, reading %s as pg_dump does: %v", r, err)
			}
		}
		if _, err := conn.Exec(h.ctx, `SELECT * FROM walapply_ddl.secret`); err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("a plain role reading the capture's key: want permission denied, got %v", err)
		}
	})
}
