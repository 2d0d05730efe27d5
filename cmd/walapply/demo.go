package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/testenv"
)

func init() {
	register("demo", command{summary: "replicate between two throwaway local clusters and compare", run: demoCmd})
}

// demoCmd shows walapply working end to end on a new machine: two local
// throwaway clusters, a sample schema, a short workload replicated with
// progress lines, and a row-by-row comparison.
func demoCmd(ctx context.Context, args []string) error {
	fs := newFlagSet("demo")
	version := fs.Int("pg", 15, "PostgreSQL major version of both clusters (15 from the system; 16-18 are fetched once)")
	seconds := fs.Duration("duration", 5*time.Second, "how long the workload runs")
	if err := parseWithEnv(fs, args); err != nil {
		return err
	}
	log, err := newLogger(os.Stderr, "console", "info")
	if err != nil {
		return err
	}
	say := func(format string, a ...any) { fmt.Printf("==> "+format+"\n", a...) }

	say("starting two throwaway PostgreSQL %d clusters (source and target)", *version)
	clusters := make([]*testenv.Cluster, 2)
	for i := range clusters {
		c, err := testenv.Start(ctx, testenv.Options{Version: *version})
		if err != nil {
			return fmt.Errorf("starting a local cluster: %w", err)
		}
		defer c.Close()
		clusters[i] = c
	}
	source, target := clusters[0], clusters[1]
	say("source on 127.0.0.1:%d, target on 127.0.0.1:%d", source.Port(), target.Port())

	schema := []string{
		`CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, email text)`,
		`CREATE TABLE orders (id bigint PRIMARY KEY, customer int NOT NULL, amount numeric(12,2), status text, created timestamptz DEFAULT now())`,
	}
	for _, c := range clusters {
		for _, s := range schema {
			if err := c.Exec(ctx, s); err != nil {
				return err
			}
		}
	}
	if err := source.Exec(ctx, `CREATE PUBLICATION demo FOR TABLE customers, orders`); err != nil {
		return err
	}
	// The slot exists before the first write, so that nothing written
	// before the applier connects is missed.
	if err := source.Exec(ctx, `SELECT pg_create_logical_replication_slot('demo', 'pgoutput')`); err != nil {
		return err
	}
	say("schema created on both; publication \"demo\" and slot \"demo\" on the source")

	cfg := apply.Config{
		Source: source.ConnString("postgres"), Target: target.ConnString("postgres"),
		Slot: "demo", CreateSlot: true, Publications: []string{"demo"},
		ProgressInterval: time.Second, FeedbackInterval: 200 * time.Millisecond, Logger: log,
	}
	say("running: walapply run --source %s --target %s --slot demo --publication demo", source.ConnString("postgres"), target.ConnString("postgres"))
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- apply.Run(runCtx, cfg) }()
	running := true
	defer func() {
		if running {
			stop()
			<-done
		}
	}()

	say("writing on the source for %s", *seconds)
	src, err := source.Connect(ctx, "postgres")
	if err != nil {
		return err
	}
	defer src.Close(context.Background())
	txns, err := demoWorkload(ctx, src, *seconds)
	if err != nil {
		return err
	}
	say("%d transactions written; waiting for the replica to catch up", txns)
	if err := waitCaughtUp(ctx, src, done); err != nil {
		return err
	}
	stop()
	running = false
	if err := <-done; err != nil {
		return err
	}

	say("comparing source and target row by row")
	total := 0
	for _, table := range []string{"customers", "orders"} {
		n, err := compareTable(ctx, source, target, table)
		if err != nil {
			return err
		}
		say("  %-10s %6d rows, identical", table, n)
		total += n
	}
	say("the replica matches: %d rows in 2 tables", total)
	return nil
}

// demoWorkload inserts, updates and deletes for d.
func demoWorkload(ctx context.Context, conn *pgx.Conn, d time.Duration) (int, error) {
	end := time.Now().Add(d)
	n := 0
	for ; time.Now().Before(end) && ctx.Err() == nil; n++ {
		batch := &pgx.Batch{}
		c := rand.IntN(500)
		batch.Queue(`INSERT INTO customers VALUES ($1, $2, $3) ON CONFLICT (id) DO UPDATE SET email = excluded.email`,
			c, fmt.Sprintf("customer %d", c), fmt.Sprintf("c%d-%d@example.com", c, n))
		batch.Queue(`INSERT INTO orders (id, customer, amount, status) VALUES ($1, $2, $3, 'new')`, n, c, float64(rand.IntN(100000))/100)
		if n%3 == 0 && n > 0 {
			batch.Queue(`UPDATE orders SET status = 'paid' WHERE id = $1`, rand.IntN(n))
		}
		if n%10 == 0 && n > 0 {
			batch.Queue(`DELETE FROM orders WHERE id = $1`, rand.IntN(n))
		}
		tx, err := conn.Begin(ctx)
		if err != nil {
			return n, err
		}
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			_ = tx.Rollback(ctx)
			return n, err
		}
		if err := tx.Commit(ctx); err != nil {
			return n, err
		}
	}
	return n, nil
}

// waitCaughtUp waits until the slot confirms the source's current position.
func waitCaughtUp(ctx context.Context, src *pgx.Conn, done <-chan error) error {
	var lsn string
	if err := src.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
		return err
	}
	for {
		var ok bool
		if err := src.QueryRow(ctx, "SELECT COALESCE(bool_or(confirmed_flush_lsn >= $1::pg_lsn), false) FROM pg_replication_slots WHERE slot_name = 'demo'", lsn).Scan(&ok); err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case err := <-done:
			return fmt.Errorf("the applier stopped: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func compareTable(ctx context.Context, a, b *testenv.Cluster, table string) (int, error) {
	var sides [2][]string
	for i, c := range []*testenv.Cluster{a, b} {
		conn, err := c.Connect(ctx, "postgres")
		if err != nil {
			return 0, err
		}
		rows, err := conn.Query(ctx, "SELECT x::text FROM "+pgx.Identifier{table}.Sanitize()+" x")
		if err == nil {
			sides[i], err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		conn.Close(ctx)
		if err != nil {
			return 0, err
		}
		slices.Sort(sides[i])
	}
	if !slices.Equal(sides[0], sides[1]) {
		return 0, fmt.Errorf("table %s differs: %d rows on the source, %d on the target", table, len(sides[0]), len(sides[1]))
	}
	return len(sides[0]), nil
}
