package twophase

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/testenv"
)

// TestRecoverLeftovers runs restart recovery on one server that plays both
// source and target: a transaction of the applier whose source transaction
// is still prepared waits, one whose outcome came is dropped, and only the
// remaining one is reported, once, after the stream has passed the source's
// position. In GIDModeSource all of them are reported at once.
func TestRecoverLeftovers(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		ctx := context.Background()
		c := testenv.NewCluster(t, testenv.Options{Version: version})
		conn, err := c.Connect(ctx, "postgres")
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		exec := func(sqls ...string) {
			t.Helper()
			testenv.MustExecConn(t, ctx, conn, sqls...)
		}
		exec(`CREATE TABLE t (id int)`, `BEGIN`, `INSERT INTO t VALUES (1)`, PrepareSQL("src"))
		var xid string
		if err := conn.QueryRow(ctx, `SELECT transaction::text FROM pg_catalog.pg_prepared_xacts WHERE gid = 'src'`).Scan(&xid); err != nil {
			t.Fatal(err)
		}
		waiting, orphan, finished := "walapply_r_"+xid, "walapply_r_4000000000", "walapply_r_4000000001"
		for _, gid := range []string{waiting, orphan, finished} {
			exec(`BEGIN`, `INSERT INTO t VALUES (2)`, PrepareSQL(gid))
		}

		var logs bytes.Buffer
		l, err := FindLeftovers(ctx, conn, conn.PgConn(), "r", GIDModeApplier, zerolog.New(&logs))
		if err != nil {
			t.Fatal(err)
		}
		if got := logs.String(); strings.Count(got, "waiting for its outcome") != 1 || !strings.Contains(got, waiting) {
			t.Errorf("FindLeftovers logged %q; want the wait for %s only", got, waiting)
		}
		logs.Reset()
		l.Finished(finished)
		l.Check(ctx, conn, l.until-1)
		if logs.Len() != 0 {
			t.Errorf("Check before the source's position logged %q", logs.String())
		}
		l.Check(ctx, conn, l.until)
		if got := logs.String(); strings.Count(got, "leftover prepared transaction") != 1 || !strings.Contains(got, orphan) {
			t.Errorf("Check logged %q; want %s reported as a leftover, alone", got, orphan)
		}
		logs.Reset()
		l.Check(ctx, conn, l.until)
		if logs.Len() != 0 {
			t.Errorf("a second Check logged %q", logs.String())
		}

		l, err = FindLeftovers(ctx, conn, conn.PgConn(), "r", GIDModeSource, zerolog.New(&logs))
		if err != nil || l != nil {
			t.Fatalf("FindLeftovers in GIDModeSource = %v, %v; want nothing to check", l, err)
		}
		if got := strings.Count(logs.String(), "--gid-mode source does not finish"); got != 3 {
			t.Errorf("GIDModeSource: %d warnings, want 3: %q", got, logs.String())
		}
		l.Check(ctx, conn, ^protocol.LSN(0)) // nil: nothing
		l.Finished(orphan)
	})
}
