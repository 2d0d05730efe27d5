package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/testenv"
)

// TestCopyProgressOwnRole: the copy's progress in pg_stat_progress_copy
// needs no grant: a role with LOGIN only (docs/SECURITY.md's target role,
// here with just INSERT on the table) sees the progress of its own COPY,
// and another such role does not (status then shows no progress).
func TestCopyProgressOwnRole(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		tgt := testenv.NewPair(t, testenv.PairOptions{Version: version}).Target
		statusMust(t, tgt.Exec(ctx, `CREATE ROLE walapply_target LOGIN; CREATE ROLE other LOGIN;
			CREATE TABLE x (id int PRIMARY KEY); GRANT INSERT ON x TO walapply_target;
			CREATE FUNCTION hold() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
			 BEGIN IF NEW.id = 3000 THEN PERFORM pg_advisory_xact_lock_shared(4244); END IF; RETURN NEW; END $$;
			CREATE TRIGGER hold BEFORE INSERT ON x FOR EACH ROW EXECUTE FUNCTION hold()`))
		as := func(role, app string) *pgx.Conn {
			t.Helper()
			url := strings.Replace(tgt.ConnString(""), "//postgres@", "//"+role+"@", 1)
			if app != "" {
				url += "&application_name=" + strings.ReplaceAll(app, " ", "%20")
			}
			c, err := pgx.Connect(ctx, url)
			statusMust(t, err)
			t.Cleanup(func() { c.Close(context.Background()) })
			return c
		}
		lock := as("postgres", "")
		_, err := lock.Exec(ctx, "SELECT pg_advisory_lock(4244)")
		statusMust(t, err)
		copier := as("walapply_target", "walapply a copy 1")
		var rows strings.Builder
		for i := 1; i <= 5000; i++ {
			fmt.Fprintf(&rows, "%d\n", i)
		}
		done := make(chan error, 1)
		go func() {
			_, err := copier.PgConn().CopyFrom(ctx, strings.NewReader(rows.String()), "COPY x FROM STDIN")
			done <- err
		}()
		for waiting := false; !waiting; time.Sleep(20 * time.Millisecond) {
			statusMust(t, lock.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted)`).Scan(&waiting))
		}
		for _, tc := range []struct {
			role string
			want int64 // -1: no progress seen
		}{{"walapply_target", 2999}, {"other", -1}} {
			a := &applierStatus{Name: "a", Tables: []tableStatus{{Schema: "public", Name: "x", State: "pending"}}}
			statusMust(t, readCopyProgress(ctx, as(tc.role, ""), a))
			got := int64(-1)
			if p := a.Tables[0].Copying; p != nil {
				got = p.Rows
			}
			if got != tc.want {
				t.Errorf("as %s: rows so far %d, want %d", tc.role, got, tc.want)
			}
		}
		_, err = lock.Exec(ctx, "SELECT pg_advisory_unlock(4244)")
		statusMust(t, err)
		statusMust(t, <-done)
	})
}
