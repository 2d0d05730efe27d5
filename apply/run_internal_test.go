package apply

import (
	"context"
	"testing"
	"time"

	"github.com/walapply/walapply/testenv"
)

// TestTargetConnectionsRunWithoutJIT: the catalog query that finds
// equality operators is costed above jit_above_cost, and compiling it took
// half a second per table (a 50-table backlog drained in 5 s instead of
// 2 s). Target connections turn JIT off unless the connection string
// asks for it. They also plan prepared statements once (generic plans),
// unless the connection string says otherwise.
func TestTargetConnectionsRunWithoutJIT(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := testenv.NewCluster(t, testenv.Options{})
	for _, tc := range []struct{ conn, want, plans string }{
		{c.ConnString("postgres"), "off", "force_generic_plan"},
		{c.ConnString("postgres") + "&jit=on&plan_cache_mode=auto", "on", "auto"},
	} {
		conn, err := connectTarget(ctx, &Config{Target: tc.conn, Name: "x"}, "test")
		if err != nil {
			t.Fatal(err)
		}
		var got, plans string
		if err := conn.QueryRow(ctx, "SELECT current_setting('jit'), current_setting('plan_cache_mode')").Scan(&got, &plans); err != nil {
			t.Fatal(err)
		}
		conn.Close(ctx)
		if got != tc.want || plans != tc.plans {
			t.Errorf("%s: jit = %s, plan_cache_mode = %s, want %s, %s", tc.conn, got, plans, tc.want, tc.plans)
		}
	}
}
