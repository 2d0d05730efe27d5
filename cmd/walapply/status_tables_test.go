package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/internal/testutil"
	"github.com/walapply/walapply/testenv"
)

// status lists the tables each applier knows and their state, like
// pg_subscription_rel: an applier made with --copy copies a table added
// to its publication; one made without warns once and shows the table as
// "published, not copied"; a table dropped from a publication shows as no
// longer published.
func TestStatusTables(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		ctx := context.Background()
		pair := testenv.NewPair(t, testenv.PairOptions{Version: version})
		for _, c := range []*testenv.Cluster{pair.Source, pair.Target} {
			for _, tb := range []string{"c_old", "c_new", "n_old", "n_new"} {
				statusMust(t, c.Exec(ctx, "CREATE TABLE "+tb+" (id int PRIMARY KEY)"))
			}
		}
		statusMust(t, pair.Source.Exec(ctx, `INSERT INTO c_old SELECT generate_series(1, 10); INSERT INTO c_new SELECT generate_series(1, 20);
			INSERT INTO n_new SELECT generate_series(1, 30);
			CREATE PUBLICATION pc FOR TABLE c_old; CREATE PUBLICATION pn FOR TABLE n_old`))
		source, target := pair.Source.ConnString(""), pair.Target.ConnString("")
		plainLog := &testutil.LogBuffer{}
		start := func(name string, copy bool, pub string) *apply.Runner {
			t.Helper()
			var w zerolog.LevelWriter = zerolog.MultiLevelWriter(zerolog.NewTestWriter(t))
			if !copy {
				w = zerolog.MultiLevelWriter(zerolog.NewTestWriter(t), plainLog)
			}
			r, err := apply.Start(ctx, apply.Config{Source: source, Target: target, Slot: name, CreateSlot: !copy, Copy: copy,
				Publications: []string{pub}, Name: name, FeedbackInterval: 50 * time.Millisecond, ProgressInterval: -1,
				Logger: zerolog.New(w).Level(zerolog.InfoLevel)})
			statusMust(t, err)
			return r
		}
		rc, rn := start("copier", true, "pc"), start("plain", false, "pn")
		statusMust(t, pair.Source.Exec(ctx, `ALTER PUBLICATION pc ADD TABLE c_new; ALTER PUBLICATION pn ADD TABLE n_new;
			INSERT INTO c_new VALUES (-1); INSERT INTO n_new VALUES (-1); UPDATE n_new SET id = 100 WHERE id = 1`))
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		statusMust(t, rc.WaitCaughtUp(wctx))
		statusMust(t, rn.WaitCaughtUp(wctx))
		statusMust(t, rc.Stop())
		statusMust(t, rn.Stop())
		// Again, and with n_old dropped from pn: no second warning.
		statusMust(t, pair.Source.Exec(ctx, `ALTER PUBLICATION pn DROP TABLE n_old; INSERT INTO n_new VALUES (-2)`))
		rn = start("plain", false, "pn")
		statusMust(t, rn.WaitCaughtUp(wctx))
		statusMust(t, rn.Stop())
		if n := plainLog.Count("newly published table"); n != 1 {
			t.Errorf("%d warnings about the newly published table n_new, want 1:\n%s", n, plainLog.String())
		}
		if n := plainLog.Count("update_missing"); n != 1 {
			t.Errorf("%d update_missing for n_new's row not copied, want 1", n)
		}

		rep := statusJSON(t, ctx, "--target", target)
		got := map[string]string{}
		for _, a := range rep.Appliers {
			for _, tb := range a.Tables {
				s := tb.State
				if !tb.Published {
					s += " unpublished"
				}
				if (tb.State == "done") != (tb.CopyLSN != "" && tb.Rows != nil) {
					t.Errorf("%s %s: state %s, copy LSN %q, rows %v", a.Name, tb.Name, tb.State, tb.CopyLSN, tb.Rows)
				}
				got[a.Name+" "+tb.Schema+"."+tb.Name] = s
			}
		}
		want := map[string]string{
			"copier public.c_old": "done", "copier public.c_new": "done",
			"plain public.n_old": "existing unpublished", "plain public.n_new": "not_copied",
		}
		if len(got) != len(want) {
			t.Errorf("tables in status --json: %v, want %v", got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("status --json: %s is %q, want %q", k, got[k], v)
			}
		}
		for _, a := range rep.Appliers {
			if a.Name == "copier" && (a.Copy == nil || !a.Copy.Complete || a.Copy.Tables != 2 || a.Copy.Rows != 31) {
				t.Errorf("copier's initial copy %+v: want complete, 2 tables, 31 rows", a.Copy)
			}
		}
		text, _, err := runStatus(ctx, "--target", target)
		statusMust(t, err)
		for _, frag := range []string{
			`tables             2 published tables: 2 copied`,
			`"public"."c_new"  copied at `,
			`tables             1 published table: 1 published, not copied; 1 no longer published`,
			`"public"."n_new"  published, not copied`,
			`"public"."n_old"  NO LONGER PUBLISHED`,
		} {
			if !strings.Contains(text, frag) {
				t.Errorf("status text lacks %q:\n%s", frag, text)
			}
		}
		t.Logf("status:\n%s", text)
	})
}
