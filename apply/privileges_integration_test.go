package apply_test

import (
	"encoding/json"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/testenv"
)

// privilegeStatements parses the statements out of a *PrivilegeError's
// text, per side: the lines indented under "run on the target" and "run
// on the source". Parsing the text, not the struct, checks that what a
// user reads is what works.
func privilegeStatements(t *testing.T, err error) (target, source []string) {
	t.Helper()
	var pe *apply.PrivilegeError
	if !errors.As(err, &pe) || apply.IsTransient(err) {
		t.Fatalf("want a permanent *apply.PrivilegeError, got %v", err)
	}
	var side *[]string
	for _, line := range strings.Split(err.Error(), "\n") {
		switch {
		case strings.Contains(line, "run on the target"):
			side = &target
		case strings.Contains(line, "run on the source"):
			side = &source
		case strings.HasPrefix(line, "  ") && side != nil:
			s := strings.TrimSpace(line)
			if !strings.HasSuffix(s, ";") {
				t.Fatalf("statement %q does not end with ';' in:\n%v", s, err)
			}
			*side = append(*side, strings.TrimSuffix(s, ";"))
		}
	}
	return target, source
}

// From bare roles (a target role with LOGIN only, a source role with
// LOGIN only), one start lists every missing privilege on both sides at
// once and creates nothing; the statements it prints, executed as they
// are, are all a run with --copy and --two-phase needs. A privilege
// revoked later is named exactly, SELECT where SELECT is missing.
func TestPrivilegesListedAtOnce(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, nil)
		tables := []string{`CREATE SCHEMA shop`, `CREATE SCHEMA "Odd ""Schema"""`,
			`CREATE TABLE shop.items (id int PRIMARY KEY, name text)`,
			`CREATE TABLE shop.log (id int, line text)`,
			`CREATE TABLE "Odd ""Schema"""."t; x" (id int PRIMARY KEY)`}
		h.both(tables...)
		h.source(`CREATE PUBLICATION p1 FOR TABLE shop.items, "Odd ""Schema"""."t; x"`,
			`CREATE PUBLICATION p2 FOR TABLE shop.log WITH (publish = 'insert')`,
			`CREATE ROLE wa_src LOGIN`,
			`INSERT INTO shop.items SELECT g, 'item ' || g FROM generate_series(1, 50) g`,
			`INSERT INTO shop.log VALUES (1, 'one')`,
			`INSERT INTO "Odd ""Schema"""."t; x" VALUES (1), (2)`)
		h.target(`CREATE ROLE wa_tgt LOGIN`)

		cfg := h.secConfig("privs", "", nil)
		cfg.Publications = []string{"p1", "p2"}
		cfg.Source, cfg.Target = secUserURL(h.pair.Source, "wa_src", ""), secUserURL(h.pair.Target, "wa_tgt", "")
		cfg.Copy, cfg.TwoPhase = true, true

		err := secRun(t, cfg)
		t.Logf("from bare roles:\n%v", err)
		target, source := privilegeStatements(t, err)
		wantTarget := []string{
			`GRANT CREATE ON DATABASE "postgres" TO "wa_tgt"`,
			`GRANT SET ON PARAMETER session_replication_role TO "wa_tgt"`,
			`GRANT USAGE ON SCHEMA "Odd ""Schema""" TO "wa_tgt"`,
			`GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON TABLE "Odd ""Schema"""."t; x" TO "wa_tgt"`,
			`GRANT USAGE ON SCHEMA "shop" TO "wa_tgt"`,
			`GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON TABLE "shop"."items" TO "wa_tgt"`,
			// Published for inserts only: SELECT for the copy's check
			// that it is empty, nothing for updates and deletes.
			`GRANT SELECT, INSERT ON TABLE "shop"."log" TO "wa_tgt"`,
		}
		for _, fn := range []string{"create", "session_setup", "xact_setup", "progress", "session_reset", "session_is_setup", "advance", "xact_reset", "drop"} {
			wantTarget = append(wantTarget, "EXECUTE ON FUNCTION pg_catalog.pg_replication_origin_"+fn+"(")
		}
		wantSource := []string{
			`ALTER ROLE "wa_src" REPLICATION`,
			`GRANT USAGE ON SCHEMA "Odd ""Schema""" TO "wa_src"`,
			`GRANT SELECT ON TABLE "Odd ""Schema"""."t; x" TO "wa_src"`,
			`GRANT USAGE ON SCHEMA "shop" TO "wa_src"`,
			`GRANT SELECT ON TABLE "shop"."items" TO "wa_src"`,
			`GRANT SELECT ON TABLE "shop"."log" TO "wa_src"`,
		}
		checkListed(t, "target", target, wantTarget)
		checkListed(t, "source", source, wantSource)

		// Nothing was created on either side.
		if got := h.rows(h.pair.Target, `SELECT (to_regnamespace('walapply') IS NULL)::text || ' ' || (SELECT count(*) FROM pg_replication_origin)::text`); got[0] != "true 0" {
			t.Errorf("after the listing, the target has schema walapply absent/origins: %s, want true 0", got[0])
		}
		if got := h.rows(h.pair.Source, `SELECT count(*)::text FROM pg_replication_slots`); got[0] != "0" {
			t.Errorf("after the listing, the source has %s slots", got[0])
		}

		// Exactly the printed statements, as a superuser: the run works.
		h.target(target...)
		h.source(source...)
		stop := h.runApplier(cfg)
		h.waitCaughtUp("privs", time.Minute)
		h.source(`UPDATE shop.items SET name = 'changed' WHERE id <= 10`,
			`DELETE FROM shop.items WHERE id > 40`,
			`INSERT INTO shop.log VALUES (2, 'two')`,
			`BEGIN; INSERT INTO shop.items VALUES (100, 'prepared'); PREPARE TRANSACTION 'pp'`, `COMMIT PREPARED 'pp'`,
			`TRUNCATE "Odd ""Schema"""."t; x"`, `INSERT INTO "Odd ""Schema"""."t; x" VALUES (3)`)
		h.waitCaughtUp("privs", time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{`SELECT (i.*)::text FROM shop.items i`, `SELECT (l.*)::text FROM shop.log l`, `SELECT (x.*)::text FROM "Odd ""Schema"""."t; x" x`} {
			if want, got := h.rows(h.pair.Source, q), h.rows(h.pair.Target, q); !slices.Equal(want, got) {
				t.Errorf("%s differs:\n%s", q, diffRows(want, got))
			}
		}

		// SELECT revoked while walapply runs: the UPDATE that needs it
		// fails (42501) and walapply stops, the origin where it was (the
		// retry without grouping that a failure inside a group makes
		// starts a session, whose check lists SELECT); the next start
		// names SELECT (before this check, it failed at the first UPDATE
		// again, as a permission error on UPDATE).
		stop = h.runApplier(cfg)
		h.waitCaughtUp("privs", time.Minute)
		before := h.secOrigin("privs")
		h.target(`REVOKE SELECT ON shop.items FROM wa_tgt`)
		h.source(`UPDATE shop.items SET name = 'again' WHERE id = 1`)
		select {
		case err = <-h.applierDone:
		case <-time.After(time.Minute):
			t.Fatal("the applier did not stop at an UPDATE without SELECT")
		}
		_ = stop()
		var pe *apply.PrivilegeError
		if err == nil || apply.IsTransient(err) || !errors.As(err, &pe) && !strings.Contains(err.Error(), "42501") {
			t.Errorf("UPDATE without SELECT while running: want a permanent permission error, got %v", err)
		}
		t.Logf("SELECT revoked while running: %v", err)
		if after := h.secOrigin("privs"); after != before {
			t.Errorf("origin moved from %s to %s past a failed UPDATE", before, after)
		}
		err = secRun(t, cfg)
		t.Logf("without SELECT on shop.items:\n%v", err)
		target, source = privilegeStatements(t, err)
		checkListed(t, "target", target, []string{`GRANT SELECT ON TABLE "shop"."items" TO "wa_tgt"`})
		checkListed(t, "source", source, nil)
		if after := h.secOrigin("privs"); after != before {
			t.Errorf("origin moved from %s to %s past a failed start", before, after)
		}

		// Row-level security on a source table the role does not own: a
		// copy of it would miss the rows the policies hide, silently.
		h.target(`GRANT SELECT ON shop.items TO wa_tgt`)
		h.source(`ALTER TABLE shop.log ENABLE ROW LEVEL SECURITY`)
		target, source = privilegeStatements(t, secRun(t, cfg))
		checkListed(t, "target", target, nil)
		checkListed(t, "source", source, []string{`ALTER ROLE "wa_src" BYPASSRLS`})
	})
}

// checkListed checks that got holds exactly one statement per want, each
// equal to it or, for a want ending in "(", starting with its text after
// "GRANT " (function arguments differ between versions).
func checkListed(t *testing.T, side string, got, want []string) {
	t.Helper()
	left := slices.Clone(got)
	for _, w := range want {
		i := slices.IndexFunc(left, func(s string) bool {
			if strings.HasSuffix(w, "(") {
				return strings.HasPrefix(s, "GRANT "+w)
			}
			return s == w
		})
		if i < 0 {
			t.Errorf("%s: %q not listed; listed:\n%s", side, w, strings.Join(got, "\n"))
			continue
		}
		left = slices.Delete(left, i, i+1)
	}
	if len(left) > 0 {
		t.Errorf("%s: listed beyond what is needed:\n%s", side, strings.Join(left, "\n"))
	}
}

// listedAs is how a start lists the privilege a grant of docs/SECURITY.md
// gives, when it is missing: quoted, and ON ALL TABLES IN SCHEMA shop per
// table of TestLeastPrivileges.
func listedAs(grant string) []string {
	head, role, _ := strings.Cut(grant, " TO ")
	role = secIdent(role)
	if privs, schema, ok := strings.Cut(head, " ON ALL TABLES IN SCHEMA "); ok {
		var out []string
		for _, table := range []string{"events", "items", "scratch"} {
			out = append(out, privs+" ON TABLE "+secQualified(schema, table)+" TO "+role)
		}
		return out
	}
	for _, kw := range []string{" ON SCHEMA ", " ON DATABASE "} {
		if before, object, ok := strings.Cut(head, kw); ok {
			head = before + kw + secIdent(object)
		}
	}
	return []string{head + " TO " + role}
}

// leastPrivilegeCopy runs TestLeastPrivileges' applier with --copy into
// database appdb3, whose tables are empty, with the documented grants and
// those the copy adds; the start before the copy grants lists exactly
// those.
func leastPrivilegeCopy(t *testing.T, h *harness, doc map[string][]string, compare func(db string)) {
	t.Helper()
	src, dst := h.pair.Source, h.pair.Target
	if err := dst.CreateDatabase(h.ctx, "appdb3"); err != nil {
		t.Fatal(err)
	}
	testenv.MustExec(t, dst, "appdb3", append([]string{`CREATE SCHEMA shop`}, strings.Split(shopTables, ";")...)...)
	testenv.MustExec(t, dst, "appdb3", doc["target-schema-precreated"]...)
	testenv.MustExec(t, dst, "appdb3", doc["target-grants"]...)
	cfg := h.secConfig("priv3", "walapply_pub", nil)
	cfg.Source = secUserURL(src, "walapply_source", privPW)
	cfg.Target = strings.Replace(secUserURL(dst, "walapply_target", privPW), "/postgres?", "/appdb3?", 1)
	cfg.Copy = true

	target, source := privilegeStatements(t, secRun(t, cfg))
	var wantTarget []string
	for _, g := range doc["target-grants-copy"] {
		wantTarget = append(wantTarget, listedAs(g)...)
	}
	wantSource := []string{`GRANT USAGE ON SCHEMA "shop" TO "walapply_source"`}
	for _, table := range []string{"events", "items", "scratch"} {
		wantSource = append(wantSource, `GRANT SELECT ON TABLE `+secQualified("shop", table)+` TO "walapply_source"`)
	}
	if !slices.Equal(target, wantTarget) || !slices.Equal(source, wantSource) {
		t.Errorf("--copy without its grants: listed\n%s\n%s\nwant\n%s\n%s", strings.Join(target, "\n"), strings.Join(source, "\n"),
			strings.Join(wantTarget, "\n"), strings.Join(wantSource, "\n"))
	}

	testenv.MustExec(t, dst, "appdb3", doc["target-grants-copy"]...)
	testenv.MustExec(t, src, "postgres", doc["source-grants-copy"]...)
	stop := h.runApplier(cfg)
	h.waitCaughtUp("priv3", time.Minute)
	h.source(`UPDATE shop.items SET price = 7 WHERE id = 2`, `DELETE FROM shop.events WHERE id = 1`)
	h.waitCaughtUp("priv3", time.Minute)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	compare("appdb3")
	// Origins belong to the cluster: priv and priv2 have theirs too.
	if got := rowsIn(t, dst, "appdb3", `SELECT roname::text FROM pg_replication_origin`); !slices.Equal(got, []string{"walapply_priv", "walapply_priv2", "walapply_priv3"}) {
		t.Errorf("origins after the copy: %v, want the appliers' only (the copy workers' dropped)", got)
	}
}

// leastPrivilegeStatus runs `walapply status`, text and --json, as
// TestLeastPrivileges' roles.
func leastPrivilegeStatus(t *testing.T, h *harness) {
	t.Helper()
	bin := walapplyBinary(t)
	srcURL := secUserURL(h.pair.Source, "walapply_source", privPW)
	for _, db := range []string{"postgres", "appdb3"} {
		tgtURL := strings.Replace(secUserURL(h.pair.Target, "walapply_target", privPW), "/postgres?", "/"+db+"?", 1)
		out, err := exec.Command(bin, "status", "--target", tgtURL, "--source", srcURL).CombinedOutput()
		if err != nil {
			t.Errorf("walapply status on %s as walapply_target: %v\n%s", db, err, out)
			continue
		}
		if !strings.Contains(string(out), "applied up to source ") || !strings.Contains(string(out), "inactive (no applier connected)") {
			t.Errorf("walapply status on %s lacks the origin's progress or the slot:\n%s", db, out)
		}
		out, err = exec.Command(bin, "status", "--target", tgtURL, "--source", srcURL, "--json").Output()
		if err != nil {
			t.Errorf("walapply status --json on %s as walapply_target: %v", db, err)
			continue
		}
		var rep struct {
			Appliers []struct {
				Name   string `json:"name"`
				Origin struct {
					Progress string `json:"progress_lsn"`
				} `json:"origin"`
				Copy *struct {
					Complete bool `json:"complete"`
				} `json:"initial_copy"`
				Source *struct {
					Slot *struct {
						ConfirmedFlushLSN string `json:"confirmed_lsn"`
					} `json:"slot"`
				} `json:"source"`
			} `json:"appliers"`
		}
		if err := json.Unmarshal(out, &rep); err != nil {
			t.Fatalf("walapply status --json printed %s: %v", out, err)
		}
		for _, a := range rep.Appliers {
			if a.Origin.Progress == "" || a.Source == nil || a.Source.Slot == nil || a.Source.Slot.ConfirmedFlushLSN == "" {
				t.Errorf("status --json on %s, applier %s: no progress or slot:\n%s", db, a.Name, out)
			}
			if db == "appdb3" && (a.Copy == nil || !a.Copy.Complete) {
				t.Errorf("status --json on appdb3: the initial copy is not shown complete:\n%s", out)
			}
		}
		if len(rep.Appliers) == 0 {
			t.Errorf("status --json on %s: no applier:\n%s", db, out)
		}
		t.Logf("walapply status --json on %s as walapply_target:\n%s", db, out)
	}
}
