package apply_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/testenv"
)

// TestConflictPolicies meets every conflict kind under every policy and
// checks the target's rows and the walapply.conflicts records.
func TestConflictPolicies(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		for _, policy := range []string{"skip", "apply"} {
			t.Run(policy, func(t *testing.T) {
				h := newHarness(t, version, nil, nil)
				h.both(`CREATE TABLE ie (id int PRIMARY KEY, v text)`, `CREATE TABLE um (id int PRIMARY KEY, v text)`,
					`CREATE TABLE dm (id int PRIMARY KEY, v text)`, `CREATE TABLE ue (id int PRIMARY KEY, v text)`)
				h.source(`CREATE PUBLICATION pub FOR TABLE ie, um, dm, ue`)
				// Rows the source has and the target lacks, and one the other way.
				h.source(`INSERT INTO um VALUES (1, 'src')`, `INSERT INTO dm VALUES (1, 'src')`, `INSERT INTO ue VALUES (1, 'one')`)
				h.target(`INSERT INTO ie VALUES (1, 'target')`, `INSERT INTO ue VALUES (1, 'one'), (2, 'taken')`)
				h.createSlot("c")
				cfg := h.config("c", "pub")
				var err error
				cfg.Conflicts, err = apply.ParseConflictPolicies(fmt.Sprintf("insert_exists=%s,update_exists=%s,update_missing=%[1]s,delete_missing=%[1]s", policy, policy))
				if err != nil {
					t.Fatal(err)
				}
				stop := h.runApplier(cfg)
				h.source(`INSERT INTO ie VALUES (1, 'source'), (2, 'fresh')`,
					`UPDATE um SET v = 'updated' WHERE id = 1`,
					`DELETE FROM dm WHERE id = 1`,
					`UPDATE ue SET id = 2, v = 'moved' WHERE id = 1`)
				h.waitCaughtUp("c", time.Minute)
				if err := stop(); err != nil {
					t.Fatal(err)
				}
				if policy == "skip" {
					h.expect(tableRows("ie", ""), "(1,target)", "(2,fresh)")
					h.expect(tableRows("um", ""))
					h.expect(tableRows("ue", ""), "(1,one)", "(2,taken)")
				} else {
					h.expect(tableRows("ie", ""), "(1,source)", "(2,fresh)")
					h.expect(tableRows("um", ""), "(1,updated)")
					h.expect(tableRows("ue", ""), "(2,moved)")
				}
				h.expect(tableRows("dm", ""))
				res := "skipped"
				if policy == "apply" {
					res = "applied"
				}
				h.expect(`SELECT kind || ' ' || resolution || ' ' || COALESCE(relation, '-') || ' ' || COALESCE(key, '-') FROM walapply.conflicts`,
					"insert_exists "+res+` "public"."ie" id=1`,
					"update_missing "+res+` "public"."um" id=1`,
					`delete_missing skipped "public"."dm" id=1`,
					"update_exists "+res+` "public"."ue" id=2`)
			})
		}
		t.Run("error", func(t *testing.T) {
			h := newHarness(t, version, nil, nil)
			h.both(`CREATE TABLE um (id int PRIMARY KEY, v text)`, `CREATE TABLE dm (id int PRIMARY KEY, v text)`,
				`CREATE TABLE ue (id int PRIMARY KEY, v text)`)
			h.source(`CREATE PUBLICATION pub FOR TABLE um, dm, ue`)
			h.source(`INSERT INTO um VALUES (1, 'src')`, `INSERT INTO dm VALUES (1, 'src')`, `INSERT INTO ue VALUES (1, 'one')`)
			h.target(`INSERT INTO ue VALUES (1, 'one'), (2, 'taken')`)
			h.createSlot("c")
			cfg := h.config("c", "pub")
			cfg.Conflicts = apply.ConflictPolicies{"update_missing": "error", "delete_missing": "error"}
			h.source(`UPDATE um SET v = 'updated' WHERE id = 1`)
			err := runUntilError(t, cfg)
			var ce *apply.ConflictError
			if !errors.As(err, &ce) || ce.Kind != "update_missing" || !strings.Contains(err.Error(), "id=1") || apply.IsTransient(err) {
				t.Fatalf("update_missing=error: got %v", err)
			}
			h.target(`INSERT INTO um VALUES (1, 'src')`)
			h.source(`DELETE FROM dm WHERE id = 1`)
			if err := runUntilError(t, cfg); !errors.As(err, &ce) || ce.Kind != "delete_missing" {
				t.Fatalf("delete_missing=error: got %v", err)
			}
			h.target(`INSERT INTO dm VALUES (1, 'src')`)
			h.source(`UPDATE ue SET id = 2 WHERE id = 1`)
			if err := runUntilError(t, cfg); err == nil || !strings.Contains(err.Error(), "23505") {
				t.Fatalf("update_exists=error (the default): got %v", err)
			}
			h.expect(tableRows("um", ""), "(1,updated)")
			h.expect(tableRows("dm", ""))
			h.expect(`SELECT count(*)::text FROM walapply.conflicts`, "0")
		})
		t.Run("skip-lsn", func(t *testing.T) {
			h := newHarness(t, version, nil, nil)
			h.both(`CREATE TABLE t (id int PRIMARY KEY)`)
			h.source(`CREATE PUBLICATION pub FOR TABLE t`)
			h.target(`INSERT INTO t VALUES (2)`)
			h.createSlot("s")
			h.source(`INSERT INTO t VALUES (1)`, `BEGIN; INSERT INTO t VALUES (2); INSERT INTO t VALUES (3); COMMIT;`, `INSERT INTO t VALUES (4)`)
			cfg := h.config("s", "pub")
			err := runUntilError(t, cfg)
			var te *apply.TxnError
			if !errors.As(err, &te) {
				t.Fatalf("want the duplicate key to stop the applier, got %v", err)
			}
			cfg.SkipLSN = te.CommitLSN
			stop := h.runApplier(cfg)
			h.waitCaughtUp("s", time.Minute)
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			h.expect(tableRows("t", ""), "(1)", "(2)", "(4)")
			h.expect(`SELECT kind || ' ' || commit_lsn::text FROM walapply.conflicts`, "skipped_by_user "+te.CommitLSN.String())
		})
	})
}
