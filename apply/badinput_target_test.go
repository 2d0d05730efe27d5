package apply_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/testenv"
)

// TestTargetDiffers: a target table that cannot take what the source sends
// (a missing column, a narrower type, a NOT NULL the source violates)
// stops walapply with a permanent error naming the table and the column,
// applies nothing of the transaction, keeps the origin before it, and
// resumes once the user fixes the target.
func TestTargetDiffers(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, nil)
		h.source(`CREATE TABLE ok (id int PRIMARY KEY)`,
			`CREATE TABLE missing_col (id int PRIMARY KEY, a text, "Extra Col" text)`,
			`CREATE TABLE narrow (id int PRIMARY KEY, code text, note text)`,
			`CREATE TABLE narrow_num (id int PRIMARY KEY, amount numeric)`,
			`CREATE TABLE not_null (id int PRIMARY KEY, v text)`,
			`CREATE PUBLICATION pub FOR TABLE ok, missing_col, narrow, narrow_num, not_null`)
		h.target(`CREATE TABLE ok (id int PRIMARY KEY)`,
			`CREATE TABLE missing_col (id int PRIMARY KEY, a text)`,
			`CREATE TABLE narrow (id int PRIMARY KEY, code varchar(3), note text)`,
			`CREATE TABLE narrow_num (id int PRIMARY KEY, amount numeric(5,2))`,
			`CREATE TABLE not_null (id int PRIMARY KEY, v text NOT NULL)`)
		h.createSlot("differ")
		cfg := h.secConfig("differ", "pub", nil)

		cases := []struct {
			table  string
			insert string
			want   []string // in the error
			fix    string
		}{
			{"missing_col", `INSERT INTO missing_col VALUES (1, 'a', 'extra')`,
				[]string{`"public"."missing_col"`, `"Extra Col"`, "missing"}, `ALTER TABLE missing_col ADD COLUMN "Extra Col" text`},
			{"narrow", `INSERT INTO narrow VALUES (1, 'ABCDEF', 'fits')`,
				[]string{`"public"."narrow"`, `column "code"`, "character varying(3)", "too long"}, `ALTER TABLE narrow ALTER COLUMN code TYPE text`},
			{"narrow_num", `INSERT INTO narrow_num VALUES (1, 12345.678)`,
				[]string{`"public"."narrow_num"`, `column "amount"`, "numeric(5,2)", "overflow"}, `ALTER TABLE narrow_num ALTER COLUMN amount TYPE numeric`},
			{"not_null", `INSERT INTO not_null VALUES (1, NULL)`,
				[]string{`"public"."not_null"`, `column "v"`, "not-null"}, `ALTER TABLE not_null ALTER COLUMN v DROP NOT NULL`},
		}
		next := 0
		for _, c := range cases {
			// A good transaction, then a bad one that also changes ok.
			next++
			h.source(`INSERT INTO ok VALUES (` + strconv.Itoa(next) + `)`)
			stop := h.runApplier(cfg)
			h.waitCaughtUp("differ", time.Minute)
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			before := h.secOrigin("differ")
			next++
			h.source(`BEGIN; INSERT INTO ok VALUES (`+strconv.Itoa(next)+`); `+c.insert+`; COMMIT`, `INSERT INTO ok VALUES (1000)`)

			err := secRun(t, cfg)
			t.Logf("%s: %v", c.table, err)
			var te *apply.TxnError
			if !errors.As(err, &te) || te.Xid == 0 || te.CommitLSN == 0 {
				t.Fatalf("%s: want a TxnError naming the source transaction, got %v", c.table, err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: the error does not say %q: %v", c.table, w, err)
				}
			}
			if apply.IsTransient(err) {
				t.Errorf("%s: the error is transient", c.table)
			}
			// Nothing of the failed transaction, nothing after it; a
			// retry changes nothing.
			if err := secRun(t, cfg); err == nil {
				t.Fatalf("%s: the retry succeeded", c.table)
			}
			if after := h.secOrigin("differ"); after != before {
				t.Errorf("%s: origin moved from %s to %s", c.table, before, after)
			}
			h.expect(`SELECT count(*)::text FROM ok WHERE id = `+strconv.Itoa(next)+` OR id = 1000`, "0")
			h.expect(`SELECT count(*)::text FROM `+c.table, "0")

			// The user fixes the target; the transaction applies.
			h.target(c.fix)
			stop = h.runApplier(cfg)
			h.waitCaughtUp("differ", time.Minute)
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			h.compare(tableRows(c.table, ""))
			h.source(`DELETE FROM ok WHERE id = 1000`)
		}
		stop := h.runApplier(cfg)
		h.waitCaughtUp("differ", time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		for _, tbl := range []string{"ok", "missing_col", "narrow", "narrow_num", "not_null"} {
			h.compare(tableRows(tbl, ""))
		}
	})
}
