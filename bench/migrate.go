package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"

	"github.com/walapply/walapply/testenv"
)

// The migrate workload is issue 20's initial copy: pgbench's tables at
// scale 50 (5 million accounts) and one table of about 1 GB of wide rows
// (900,000 rows of 1 kB), copied into an empty target, at Options.Scale
// times those sizes. It is an initial copy like the copy workload
// (copy.go) and is timed the same way; it is not among the default
// workloads (`make bench-copy` runs it, or --workloads migrate).
//
// With Options.CopySchema the target starts without any table, and the
// schema is part of what is timed: walapply runs with --schema (pg_dump's
// pre-data before the copy, the indexes and constraints after it), the
// built-in subscriber's side first restores `pg_dump --schema-only` of
// the source with psql, then subscribes. pg_dump can dump only a server of
// its own major version or older, and the only one on the test machines is
// PostgreSQL 15's: in that mode the source is PostgreSQL 15, and the run's
// version is the target's.
const (
	migratePgbenchScale = 50
	migrateWideRows     = 900_000 // of 1 kB: 1.05 GB of heap
	migrateWideTable    = "migrate_wide"
)

// schemaSourceVersion is the source's version with Options.CopySchema.
const schemaSourceVersion = 15

func migrateWorkload() workload {
	return workload{
		name: "migrate",
		describe: func(s float64) string {
			return fmt.Sprintf("initial copy of pgbench's tables at scale %d and %d rows of 1 kB (%s) into an empty target",
				migrateScale(s), scaled(migrateWideRows, s, 10), migrateWideTable)
		},
		prepare: func(ctx context.Context, r *runEnv, c *testenv.Cluster) error {
			// Empty tables with their keys; the source's are filled by
			// generate.
			if err := r.pgbench(ctx, c, "-i", "-q", "-I", "dtp", "-s", strconv.Itoa(migrateScale(r.scale))); err != nil {
				return err
			}
			return r.exec(ctx, c,
				`ALTER TABLE pgbench_history ADD COLUMN id bigserial PRIMARY KEY`,
				`CREATE TABLE `+migrateWideTable+` (id int PRIMARY KEY, payload text NOT NULL)`)
		},
		generate: func(ctx context.Context, r *runEnv) error {
			// Server-side generation (G) empties the tables first.
			if err := r.pgbench(ctx, r.source, "-i", "-q", "-I", "G", "-s", strconv.Itoa(migrateScale(r.scale))); err != nil {
				return err
			}
			// 1,000 characters, stored inline and uncompressed (rows
			// below the TOAST threshold are not compressed).
			return r.exec(ctx, r.source,
				fmt.Sprintf(`INSERT INTO `+migrateWideTable+` SELECT g, left(repeat(md5(g::text), 32), 1000) FROM generate_series(1, %d) g`,
					scaled(migrateWideRows, r.scale, 10)),
				`VACUUM ANALYZE`)
		},
		initialCopy: true,
		optIn:       true,
	}
}

func migrateScale(s float64) int { return scaled(migratePgbenchScale, s, 1) }

// restoreSchema is the built-in subscriber's side of Options.CopySchema:
// `pg_dump --schema-only` of the source (without its publication) restored
// on the target with psql, both of PostgreSQL schemaSourceVersion.
func (r *runEnv) restoreSchema(ctx context.Context) error {
	pgDump, err := testenv.Tool(schemaSourceVersion, "pg_dump")
	if err != nil {
		return err
	}
	psql, err := testenv.Tool(schemaSourceVersion, "psql")
	if err != nil {
		return err
	}
	dump := exec.CommandContext(ctx, pgDump, "--schema-only", "--no-publications", "--no-subscriptions", "-d", r.source.ConnString(r.db))
	dump.Env = append(os.Environ(), "PGSSLMODE=disable")
	var errOut bytes.Buffer
	dump.Stderr = &errOut
	script, err := dump.Output()
	if err != nil {
		return fmt.Errorf("pg_dump --schema-only of the source: %w\n%s", err, tail(errOut.String(), 20))
	}
	restore := exec.CommandContext(ctx, psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", r.target.ConnString(r.db))
	restore.Env = dump.Env
	restore.Stdin = bytes.NewReader(script)
	if out, err := restore.CombinedOutput(); err != nil {
		return fmt.Errorf("restoring the source's schema on the target with psql: %w\n%s", err, tail(string(out), 20))
	}
	return nil
}
