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
// asks for it.
func TestTargetConnectionsRunWithoutJIT(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := testenv.NewCluster(t, testenv.Options{})
	for _, tc := range []struct{ conn, want string }{
		{c.ConnString("postgres"), "off"},
		{c.ConnString("postgres") + "&jit=on", "on"},
	} {
		conn, err := connectTarget(ctx, &Config{Target: tc.conn, Name: "x"}, "test")
		if err != nil {
			t.Fatal(err)
		}
		var got string
		if err := conn.QueryRow(ctx, "SHOW jit").Scan(&got); err != nil {
			t.Fatal(err)
		}
		conn.Close(ctx)
		if got != tc.want {
			t.Errorf("%s: jit = %s, want %s", tc.conn, got, tc.want)
		}
	}
}
