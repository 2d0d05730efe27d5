package apply

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/apply/internal/engine"
	"github.com/walapply/walapply/protocol"
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

// TestRetryUngrouped: Run retries a failed transaction without grouping
// when the failure was in a group or its value was vague (the applier then
// applies it change by change and names the value), once per commit LSN.
func TestRetryUngrouped(t *testing.T) {
	tooLong := &pgconn.PgError{Severity: "ERROR", Code: "22001", Message: "value too long for type character varying(3)"}
	var te *TxnError
	vague := func(lsn protocol.LSN) error {
		te := &TxnError{CommitLSN: lsn, Err: tooLong}
		engine.SetCause(te, true, false)
		return te
	}
	for _, c := range []struct {
		name    string
		through protocol.LSN
		err     error
		want    bool
	}{
		{"first failure", 0, vague(100), true},
		{"the retry stopped at it", 100, vague(100), false},
		{"an earlier one of the group", 200, vague(100), true},
		{"grouped, not vague, earlier", 200, &TxnError{CommitLSN: 100, Grouped: true, Err: tooLong}, false},
		{"grouped, later", 50, &TxnError{CommitLSN: 100, Grouped: true, Err: tooLong}, true},
		{"neither", 0, &TxnError{CommitLSN: 100, Err: tooLong}, false},
		{"not a TxnError", 0, errors.New("x"), false},
	} {
		cfg := &Config{noGroupThrough: c.through}
		if got := cfg.retryUngrouped(c.err, &te); got != c.want {
			t.Errorf("%s: retryUngrouped = %v, want %v", c.name, got, c.want)
		}
	}
}
