package migrations

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/walapply/walapply/testenv"
)

// countingConn counts the writes to the server: pgx writes each batch of
// messages it then waits on in one write, so a write is a round trip.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// countingConfig returns dsn's configuration with every write of its
// connections counted in writes.
func countingConfig(t *testing.T, dsn string, writes *atomic.Int64) *pgx.ConnConfig {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	dial := cfg.DialFunc
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{c, writes}, nil
	}
	return cfg
}

// TestUpRoundTrips pins the round trips of UpConn, the migration every
// start of walapply runs before anything else: one on a target already at
// the latest version, three on a fresh one (look, lock and look again,
// migrate and commit). It logs what goose alone (UpDB) costs for
// comparison, connections included.
func TestUpRoundTrips(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		c := testenv.NewCluster(t, testenv.Options{Version: version})
		ctx := context.Background()
		if err := c.Exec(ctx, "CREATE DATABASE viagoose"); err != nil {
			t.Fatal(err)
		}
		// goose first, on a database of its own: whichever runs first
		// warms the cluster's caches for the other.
		for i := range 2 {
			var gooseWrites atomic.Int64
			began := time.Now()
			db := stdlib.OpenDB(*countingConfig(t, c.ConnString("viagoose"), &gooseWrites))
			if err := UpDB(ctx, db); err != nil {
				t.Fatal(err)
			}
			db.Close()
			t.Logf("goose alone (Up before UpConn), run %d: %d round trips (its connections' start-up included), %v",
				i+1, gooseWrites.Load(), time.Since(began).Round(time.Millisecond/10))
		}
		var writes atomic.Int64
		conn, err := pgx.ConnectConfig(ctx, countingConfig(t, c.ConnString("postgres"), &writes))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		for i, want := range []int64{3, 1, 1} {
			writes.Store(0)
			began := time.Now()
			if err := UpConn(ctx, conn); err != nil {
				t.Fatalf("UpConn #%d: %v", i+1, err)
			}
			t.Logf("UpConn #%d: %d round trips, %v", i+1, writes.Load(), time.Since(began).Round(time.Millisecond/10))
			if got := writes.Load(); got > want {
				t.Errorf("UpConn #%d took %d round trips, want at most %d", i+1, got, want)
			}
		}
		checkSchema(t, conn)
		current, latest, err := Version(ctx, c.ConnString("postgres"))
		if err != nil || current != latest {
			t.Fatalf("goose reads version %d after UpConn (latest %d, %v)", current, latest, err)
		}

	})
}
