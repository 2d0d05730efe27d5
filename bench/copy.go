package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/testenv"
)

const (
	copyNarrowRows = 3_000_000 // at scale 1
	copyWideRows   = 300_000   // of about 1 kB each
)

// copyWorkload is the copy workload, the initial copy (issue 17): the source holds the
// data before any slot exists, the target only the schema, and the drain
// is each applier's copy of every table up to the point where it follows
// the source:
//
//   - builtin: CREATE SUBSCRIPTION ... WITH (copy_data = true), which
//     creates its slot; timed until every table is ready in
//     pg_subscription_rel (srsubstate 'r': copied and caught up with the
//     apply worker) and the marker row, copied with the rest, is there;
//   - walapply: walapply run --copy --create-slot; timed until
//     walapply.copies says the copy finished and the marker is there.
//
// Both copy Options.CopyWorkers tables at once (max_sync_workers_per_
// subscription on the target, --copy-workers). There is no backlog to
// decode: the decode ceiling is left out, and the report gives the copy's
// rate instead, in MB of the source's tables (pg_table_size) and rows per
// second.
func copyWorkload() workload {
	return workload{
		name: "copy",
		describe: func(s float64) string {
			return fmt.Sprintf("initial copy of %d narrow rows (bigint, int, text, timestamptz, numeric) and %d rows of about 1 kB into empty tables",
				scaled(copyNarrowRows, s, 10), scaled(copyWideRows, s, 10))
		},
		prepare: func(ctx context.Context, r *runEnv, c *testenv.Cluster) error {
			return r.exec(ctx, c,
				`CREATE TABLE copy_narrow (id bigint PRIMARY KEY, a int NOT NULL, b text, c timestamptz, d numeric)`,
				`CREATE TABLE copy_wide (id int PRIMARY KEY, payload text NOT NULL)`)
		},
		generate: func(ctx context.Context, r *runEnv) error {
			return r.exec(ctx, r.source,
				fmt.Sprintf(`INSERT INTO copy_narrow
SELECT g, g %% 1000, md5(g::text), timestamptz '2024-01-01 00:00:00+00' + g * interval '1 second', g / 7.0
FROM generate_series(1, %d) g`, scaled(copyNarrowRows, r.scale, 10)),
				// 1,000 characters that do not compress away: 31 md5s
				// and a bit, different per row.
				fmt.Sprintf(`INSERT INTO copy_wide
SELECT g, left((SELECT string_agg(md5(g::text || '-' || j::text), '') FROM generate_series(1, 32) j), 1000)
FROM generate_series(1, %d) g`, scaled(copyWideRows, r.scale, 10)),
				`VACUUM ANALYZE copy_narrow, copy_wide`)
		},
		initialCopy: true,
	}
}

// copySize is the size of the tables of schema public on the source, the
// amount the copy moves (heap and TOAST, without indexes).
func (r *runEnv) copySize(ctx context.Context) (int64, error) {
	conn, err := r.source.Connect(ctx, r.db)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	var n int64
	err = conn.QueryRow(ctx, `SELECT coalesce(sum(pg_table_size(c.oid)), 0)::bigint FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'r'`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("reading the size of the tables to copy: %w", err)
	}
	return n, nil
}

// copySettings are the target's settings for a copy with workers
// tablesync workers: the apply worker and the sync workers must fit.
func copySettings(workers int) map[string]string {
	return map[string]string{
		"max_sync_workers_per_subscription": strconv.Itoa(workers),
		"max_logical_replication_workers":   strconv.Itoa(workers + 2),
		"max_worker_processes":              strconv.Itoa(workers + 10),
	}
}

// builtinCopyDone says whether the subscription has every table ready.
func builtinCopyDone(ctx context.Context, conn *pgx.Conn) (bool, error) {
	var total, ready int64
	err := conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE srsubstate = 'r') FROM pg_subscription_rel`).Scan(&total, &ready)
	if err != nil {
		return false, fmt.Errorf("reading pg_subscription_rel: %w", err)
	}
	return total > 0 && ready == total, nil
}

// walapplyCopyDone says whether walapply's initial copy finished.
func walapplyCopyDone(ctx context.Context, conn *pgx.Conn) (bool, error) {
	var done bool
	err := conn.QueryRow(ctx, `SELECT to_regclass('walapply.copies') IS NOT NULL`).Scan(&done)
	if err != nil || !done {
		return false, err
	}
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM walapply.copies WHERE finished_at IS NOT NULL)`).Scan(&done); err != nil {
		return false, fmt.Errorf("reading walapply.copies: %w", err)
	}
	return done, nil
}

// waitCopied polls the target until copied says the copy finished, then
// waits for the marker row (copied with the rest); check runs between
// polls and ends the wait with its error, as for waitMarker.
func waitCopied(ctx context.Context, conn *pgx.Conn, copied func(context.Context, *pgx.Conn) (bool, error), check func() error) error {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		done, err := copied(ctx, conn)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("%w: %w", errNoMarker, ctx.Err())
			}
			return err
		}
		if done {
			return waitMarker(ctx, conn, check)
		}
		if err := check(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: the copy did not finish: %w", errNoMarker, ctx.Err())
		case <-t.C:
		}
	}
}

// copyRates prints a copy's median rates: MB (10^6 bytes) of the source's
// tables and rows per second, and walapply's CPU per MB.
func copyRates(bytes, rows int64, d time.Duration, cpu CPU) string {
	if d <= 0 {
		return "–"
	}
	mb := float64(bytes) / 1e6
	out := fmt.Sprintf("%.1f MB/s, %.0fk rows/s", mb/d.Seconds(), float64(rows)/d.Seconds()/1000)
	if cpu.Walapply > 0 && mb > 0 {
		out += fmt.Sprintf(", walapply %.1f ms CPU/MB", cpu.Walapply.Seconds()*1000/mb)
	}
	if cpu.Writes > 0 {
		out += fmt.Sprintf(", %d write(2)s", cpu.Writes)
	}
	return out
}
