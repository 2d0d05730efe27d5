package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/walapply/walapply/testenv"
)

// startPair starts a source and a target cluster at once, of versions
// sourceVersion and version. targetSettings, if not nil, are extra
// settings of the target.
func startPair(ctx context.Context, sourceVersion, version int, targetSettings map[string]string) (source, target *testenv.Cluster, err error) {
	var (
		wg       sync.WaitGroup
		clusters [2]*testenv.Cluster
		errs     [2]error
	)
	for i := range clusters {
		opts := testenv.Options{Version: sourceVersion}
		if i == 1 {
			opts.Version, opts.Settings = version, targetSettings
		}
		wg.Go(func() { clusters[i], errs[i] = testenv.Start(ctx, opts) })
	}
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		for _, c := range clusters {
			if c != nil {
				_ = c.Close()
			}
		}
		return nil, nil, fmt.Errorf("starting PostgreSQL %d and %d clusters: %w", sourceVersion, version, err)
	}
	return clusters[0], clusters[1], nil
}

// setup creates the database, schema and initial data on both sides, then
// the publication and, last, the slot: everything after it is backlog.
func (r *runEnv) setup(ctx context.Context, w workload) error {
	var wg sync.WaitGroup
	var errs [2]error
	for i, c := range []*testenv.Cluster{r.source, r.target} {
		wg.Go(func() {
			if err := c.CreateDatabase(ctx, r.db); err != nil {
				errs[i] = err
				return
			}
			if i == 1 && r.schema {
				return // the drain creates the target's tables
			}
			if err := r.exec(ctx, c, `CREATE TABLE `+markerTable+` (id int PRIMARY KEY, at timestamptz NOT NULL)`); err != nil {
				errs[i] = err
				return
			}
			if err := w.prepare(ctx, r, c); err != nil {
				errs[i] = fmt.Errorf("preparing the %s schema on the %s: %w", w.name, [2]string{"source", "target"}[i], err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		return err
	}
	if w.initialCopy {
		// Each applier creates its slot with the copy's snapshot.
		return r.exec(ctx, r.source, `CREATE PUBLICATION `+publication+` FOR ALL TABLES`)
	}
	return r.exec(ctx, r.source,
		`CREATE PUBLICATION `+publication+` FOR ALL TABLES`,
		`SELECT pg_create_logical_replication_slot('`+slotName+`', 'pgoutput')`)
}

// exec runs statements one by one in database r.db of c, each in its own
// implicit transaction (the simple protocol, which DO blocks with COMMIT
// need).
func (r *runEnv) exec(ctx context.Context, c *testenv.Cluster, sqls ...string) error {
	conn, err := c.Connect(ctx, r.db)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for _, s := range sqls {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("executing %s: %w", abbreviate(s), err)
		}
	}
	return nil
}

// decodeCeiling times the source decoding the whole backlog without
// consuming it.
func (r *runEnv) decodeCeiling(ctx context.Context) (time.Duration, int64, error) {
	conn, err := r.source.Connect(ctx, r.db)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close(context.Background())
	var n int64
	start := time.Now()
	err = conn.QueryRow(ctx, `SELECT count(*) FROM pg_logical_slot_peek_binary_changes('`+slotName+
		`', NULL, NULL, 'proto_version', '1', 'publication_names', '`+publication+`')`).Scan(&n)
	if err != nil {
		return 0, 0, fmt.Errorf("peeking at slot %s (decode ceiling): %w", slotName, err)
	}
	return time.Since(start), n, nil
}

// settle waits (up to 10 s) until the backends that built the backlog or
// filled the tables have exited on both clusters, and a moment more for
// their postmaster to reap them: a backend reaped during the drain would
// put its whole CPU time (the copy workload's fill: seconds) into the
// drain's figure, through the postmaster's cutime.
func (r *runEnv) settle(ctx context.Context) error {
	for _, c := range []*testenv.Cluster{r.source, r.target} {
		conn, err := c.Connect(ctx, r.db)
		if err != nil {
			return err
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			var others int
			err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()`).Scan(&others)
			if err != nil {
				conn.Close(context.Background())
				return fmt.Errorf("waiting for the backlog's backends to exit: %w", err)
			}
			if others == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		conn.Close(context.Background())
	}
	time.Sleep(100 * time.Millisecond)
	return nil
}

// abbreviate shortens a statement for an error message.
func abbreviate(s string) string {
	if len(s) > 120 {
		return s[:117] + "..."
	}
	return s
}
