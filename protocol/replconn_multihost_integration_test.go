package protocol_test

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/testenv"
)

// TestConnectReplicationMultiHost: a source string listing a standby
// before its primary reaches the primary with target_session_attrs
// read-write or primary (a standby takes replication=database connections,
// but cannot serve the applier's slot), the standby without them; after a
// promotion of the standby, with the old primary stopped, the same string
// reaches the new primary. TIMELINE_HISTORY then names the switch point.
func TestConnectReplicationMultiHost(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		ctx := replTestCtx(t)
		primary := testenv.NewCluster(t, testenv.Options{Version: version})
		standby := testenv.NewStandby(t, primary, testenv.StandbyOptions{})
		hosts := testenv.MultiHostConnString("postgres", standby, primary)
		port := func(conn string) int {
			t.Helper()
			rc, err := protocol.ConnectReplication(ctx, conn)
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close(ctx)
			_, p, _ := net.SplitHostPort(rc.PgConn().Conn().RemoteAddr().String())
			n, _ := strconv.Atoi(p)
			return n
		}
		for _, attrs := range []string{"read-write", "primary"} {
			if got := port(strings.Replace(hosts, "read-write", attrs, 1)); got != primary.Port() {
				t.Errorf("target_session_attrs=%s: connected to port %d, want the primary's %d (the standby is %d)", attrs, got, primary.Port(), standby.Port())
			}
		}
		if got := port(strings.Replace(hosts, "&target_session_attrs=read-write", "", 1)); got != standby.Port() {
			t.Errorf("without target_session_attrs: connected to port %d, want the first host's %d", got, standby.Port())
		}
		if err := primary.StopImmediate(ctx); err != nil {
			t.Fatal(err)
		}
		if err := standby.Promote(ctx); err != nil {
			t.Fatal(err)
		}
		if got := port(hosts); got != standby.Port() {
			t.Errorf("after the promotion: connected to port %d, want the promoted standby's %d", got, standby.Port())
		}
		rc, err := protocol.ConnectReplication(ctx, hosts)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close(ctx)
		sys, err := rc.IdentifySystem(ctx)
		if err != nil {
			t.Fatal(err)
		}
		h, err := rc.TimelineHistory(ctx, sys.Timeline)
		if err != nil {
			t.Fatal(err)
		}
		if sys.Timeline != 2 || len(h) != 1 || h[0].Timeline != 1 || h[0].Switch == 0 || h[0].Switch > sys.XLogPos {
			t.Errorf("timeline %d, history %v (WAL at %s): want timeline 2 branching off timeline 1 before the current position", sys.Timeline, h, sys.XLogPos)
		}
	})
}
