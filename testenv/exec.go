package testenv

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// MustExec runs sqls one after the other in database db of c as postgres,
// on one connection (each statement in its own transaction unless the
// statements say BEGIN), and fails tb at the first error. It is the tests'
// one helper for setting a cluster up.
func MustExec(tb testing.TB, c *Cluster, db string, sqls ...string) {
	tb.Helper()
	ctx := context.Background()
	conn, err := c.Connect(ctx, db)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close(ctx)
	MustExecConn(tb, ctx, conn, sqls...)
}

// MustExecConn is MustExec on an open connection.
func MustExecConn(tb testing.TB, ctx context.Context, conn *pgx.Conn, sqls ...string) {
	tb.Helper()
	for _, s := range sqls {
		if _, err := conn.Exec(ctx, s); err != nil {
			tb.Fatalf("executing %q: %v", s, err)
		}
	}
}
