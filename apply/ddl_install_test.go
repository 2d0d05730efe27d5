package apply_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/internal/ddl"
	"github.com/walapply/walapply/testenv"
)

// ddlCaptureSQL lists what the DDL capture consists of on the source.
const ddlCaptureSQL = `SELECT 'trigger ' || evtname || ' ' || evtevent || ' ' || evtfoid::regproc::text || ' ' || evtenabled::text FROM pg_event_trigger
UNION ALL SELECT 'function ' || p.oid::regprocedure::text || ' ' || md5(p.prosrc) || ' ' || p.prosecdef::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'walapply_ddl'
UNION ALL SELECT 'schema ' || nspname || ' ' || coalesce(obj_description(oid, 'pg_namespace'), '') FROM pg_namespace WHERE nspname = 'walapply_ddl'`

// TestDDLInstall: run --ddl without the capture is a preflight error that
// says to install it; installing twice is a no-op; removing removes
// everything, and removing again is a no-op.
func TestDDLInstall(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		requireDDLVersions(t, version)
		h := newHarness(t, version, nil, nil)
		h.both(`CREATE TABLE t (id int PRIMARY KEY)`)
		h.source(`CREATE PUBLICATION pub FOR TABLE t`)
		cfg, logs := h.ddlConfig("islot", "off", "pub")
		err := apply.Run(h.ctx, cfg)
		var pe *apply.PreflightError
		if !strings.Contains(err.Error(), "walapply ddl install") || !errors.As(err, &pe) {
			t.Fatalf("--ddl without the capture: want a preflight error saying to run walapply ddl install, got %v", err)
		}
		h.expectOn(true, "SELECT count(*)::text FROM pg_replication_slots", "0")

		src := h.conn(true)
		if err := ddl.Install(h.ctx, src); err != nil {
			t.Fatal(err)
		}
		first := h.rows(h.pair.Source, ddlCaptureSQL)
		if len(first) != 10 { // 2 triggers, 7 functions, the schema
			t.Fatalf("installed: %q", first)
		}
		if err := ddl.Install(h.ctx, src); err != nil {
			t.Fatal(err)
		}
		if again := h.rows(h.pair.Source, ddlCaptureSQL); strings.Join(again, "\n") != strings.Join(first, "\n") {
			t.Errorf("installing twice changed the capture:\n%q\n%q", first, again)
		}
		t.Logf("installed: %q", first)

		// Installed, --ddl starts.
		// Installed, --ddl starts; DDL of a role that is no superuser
		// (and has no REPLICATION) is captured, and that role cannot emit
		// a message of its own.
		h.createSlot("islot")
		stop := h.runApplier(cfg)
		h.both(`CREATE ROLE app`)
		h.source(`ALTER TABLE t OWNER TO app`)
		h.run(src, `SET ROLE app`, `ALTER TABLE t ADD COLUMN c int`)
		// Anyone may emit a message: one the capture did not sign is
		// skipped, with a warning.
		forged := strings.Repeat("0", 64) + `{"v":1,"kind":"command","seq":1,"query":"DROP TABLE t","objects":[{"type":"table","schema":"public","identity":"public.t","tag":"DROP TABLE","table":["public","t","r"]}]}`
		h.run(src, `BEGIN`, `INSERT INTO t VALUES (1)`)
		if _, err := src.Exec(h.ctx, `SELECT pg_logical_emit_message(true, 'walapply.ddl', $1)::text`, forged); err != nil {
			t.Fatal(err)
		}
		h.run(src, `COMMIT`, `RESET ROLE`)
		// A message signed by the capture's key, but in another
		// transaction than its own (as a copy of a genuine one would be):
		// skipped too.
		replayed := `{"v":2,"kind":"command","xid":3,"seq":1,"query":"ALTER TABLE t ADD COLUMN replayed int","objects":[{"type":"table","schema":"public","identity":"public.t","tag":"ALTER TABLE","table":["public","t","r"]}]}`
		h.run(src, `BEGIN`, `INSERT INTO t VALUES (2)`)
		if _, err := src.Exec(h.ctx, `SELECT pg_logical_emit_message(true, 'walapply.ddl', walapply_ddl.sign($1) || $1)::text`, replayed); err != nil {
			t.Fatal(err)
		}
		h.run(src, `COMMIT`)
		h.waitCaughtUp("islot", time.Minute)
		if !h.hasColumn(false, "t", "c") {
			t.Errorf("the DDL was not applied")
		}
		if h.hasColumn(false, "t", "replayed") {
			t.Errorf("a signed message of another transaction was applied")
		}
		h.expect("SELECT id::text FROM t ORDER BY id", "1", "2")
		if n := logs.Count("did not sign"); n != 2 {
			t.Errorf("%d messages logged as not signed, want 2 (the forged one, the one of another transaction)", n)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}

		for range 2 {
			if err := ddl.Remove(h.ctx, src); err != nil {
				t.Fatal(err)
			}
			if left := h.rows(h.pair.Source, ddlCaptureSQL); len(left) != 0 {
				t.Errorf("removed, and still there: %q", left)
			}
		}
	})
}

// expectOn checks a query's rows on the source (true) or the target.
func (h *harness) expectOn(source bool, query string, want ...string) {
	h.t.Helper()
	c := h.pair.Target
	if source {
		c = h.pair.Source
	}
	got := h.rows(c, query)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		h.t.Errorf("%s: got %q, want %q", query, got, want)
	}
}
