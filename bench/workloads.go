package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/walapply/walapply/testenv"
)

// workload is one kind of backlog.
type workload struct {
	name string
	// describe says what the backlog is at a scale, for the report.
	describe func(scale float64) string
	// prepare creates the schema and any initial data on one side; it
	// runs on source and target alike, before the slot exists, and must
	// leave both sides identical.
	prepare func(ctx context.Context, r *runEnv, c *testenv.Cluster) error
	// generate produces the backlog on the source, after the slot exists.
	generate func(ctx context.Context, r *runEnv) error
	// streamed marks a backlog of one transaction larger than
	// logical_decoding_work_mem, which the appliers receive streamed.
	streamed bool
	// initialCopy marks the copy workload (copy.go): generate fills the
	// source before any slot exists, and the drain is the initial copy.
	initialCopy bool
	// optIn keeps the workload out of the default list (WorkloadNames):
	// it runs only when named (the migrate workload, at issue 20's size).
	optIn bool
}

// workloads in their default order.
var workloads = []workload{
	{
		name: "pgbench",
		describe: func(s float64) string {
			return fmt.Sprintf("pgbench TPC-B, scale %d, %d transactions from %d clients", pgbenchScale(s), pgbenchClients*pgbenchPerClient(s), pgbenchClients)
		},
		prepare:  preparePgbench,
		generate: generatePgbench,
	},
	{
		name: "small",
		describe: func(s float64) string {
			return fmt.Sprintf("%d single-row INSERT transactions", scaled(200000, s, 10))
		},
		prepare: func(ctx context.Context, r *runEnv, c *testenv.Cluster) error {
			return r.exec(ctx, c, `CREATE TABLE small (id bigint PRIMARY KEY, v int NOT NULL, t text, at timestamptz)`)
		},
		generate: func(ctx context.Context, r *runEnv) error {
			return r.exec(ctx, r.source, fmt.Sprintf(`DO $gen$
BEGIN
	FOR i IN 1..%d LOOP
		INSERT INTO small VALUES (i, i %% 1000, md5(i::text), clock_timestamp());
		COMMIT;
	END LOOP;
END
$gen$`, scaled(200000, r.scale, 10)))
		},
	},
	{
		name: "bulk",
		describe: func(s float64) string {
			return fmt.Sprintf("one transaction inserting %d rows", scaled(2000000, s, 10))
		},
		prepare: func(ctx context.Context, r *runEnv, c *testenv.Cluster) error {
			return r.exec(ctx, c, `CREATE TABLE bulk (id bigint PRIMARY KEY, a int NOT NULL, b text, c timestamptz, d numeric)`)
		},
		generate: func(ctx context.Context, r *runEnv) error {
			return r.exec(ctx, r.source, fmt.Sprintf(`INSERT INTO bulk
SELECT g, g %% 1000, md5(g::text), timestamptz '2024-01-01 00:00:00+00' + g * interval '1 second', g / 7.0
FROM generate_series(1, %d) g`, scaled(2000000, r.scale, 10)))
		},
		streamed: true,
	},
	{
		name: "toast",
		describe: func(s float64) string {
			return fmt.Sprintf("%d single-row UPDATE transactions of a small column in %d rows with 100 kB out-of-line values", scaled(20000, s, 10), toastRows(s))
		},
		prepare: func(ctx context.Context, r *runEnv, c *testenv.Cluster) error {
			// STORAGE EXTERNAL keeps the value out of line and
			// uncompressed; 3125 md5s make 100,000 bytes, the same on
			// both sides.
			return r.exec(ctx, c,
				`CREATE TABLE toast (id int PRIMARY KEY, small int NOT NULL, big text)`,
				`ALTER TABLE toast ALTER COLUMN big SET STORAGE EXTERNAL`,
				fmt.Sprintf(`INSERT INTO toast
SELECT i, 0, (SELECT string_agg(md5(i::text || '-' || j::text), '') FROM generate_series(1, 3125) j)
FROM generate_series(1, %d) i`, toastRows(r.scale)),
				`VACUUM ANALYZE toast`)
		},
		generate: func(ctx context.Context, r *runEnv) error {
			return r.exec(ctx, r.source, fmt.Sprintf(`DO $gen$
BEGIN
	FOR i IN 1..%d LOOP
		UPDATE toast SET small = small + 1 WHERE id = i %% %d + 1;
		COMMIT;
	END LOOP;
END
$gen$`, scaled(20000, r.scale, 10), toastRows(r.scale)))
		},
	},
	{
		name: "mixed",
		describe: func(s float64) string {
			return fmt.Sprintf("%d tables of mixed types, %d transactions of 1–5 statements (70%% insert, 20%% update, 10%% delete)", mixedTables, scaled(50000, s, 10))
		},
		prepare: func(ctx context.Context, r *runEnv, c *testenv.Cluster) error {
			return r.exec(ctx, c, mixedSchema()...)
		},
		generate: func(ctx context.Context, r *runEnv) error {
			return r.exec(ctx, r.source, mixedGenerator(scaled(50000, r.scale, 10)))
		},
	},
}

func init() { workloads = append(workloads, copyWorkload(), migrateWorkload()) }

// WorkloadNames lists the default workloads in their order.
func WorkloadNames() []string {
	var names []string
	for _, w := range workloads {
		if !w.optIn {
			names = append(names, w.name)
		}
	}
	return names
}

// allWorkloadNames lists every workload, those run only when named too.
func allWorkloadNames() []string {
	names := make([]string, len(workloads))
	for i, w := range workloads {
		names[i] = w.name
	}
	return names
}

func lookupWorkload(name string) (workload, bool) {
	for _, w := range workloads {
		if w.name == name {
			return w, true
		}
	}
	return workload{}, false
}

const pgbenchClients = 4

func pgbenchScale(s float64) int { return scaled(10, s, 1) }

func pgbenchPerClient(s float64) int {
	return scaled(100000, s, pgbenchClients) / pgbenchClients
}

func toastRows(s float64) int { return scaled(1000, s, 10) }

// preparePgbench initialises the pgbench tables with their data (pgbench
// generates it deterministically) and gives pgbench_history the primary
// key it lacks, so that both appliers can identify its rows.
func preparePgbench(ctx context.Context, r *runEnv, c *testenv.Cluster) error {
	if err := r.pgbench(ctx, c, "-i", "-q", "-I", "dtgvp", "-s", strconv.Itoa(pgbenchScale(r.scale))); err != nil {
		return err
	}
	return r.exec(ctx, c, `ALTER TABLE pgbench_history ADD COLUMN id bigserial PRIMARY KEY`)
}

// generatePgbench runs exactly clients × per-client TPC-B transactions.
func generatePgbench(ctx context.Context, r *runEnv) error {
	return r.pgbench(ctx, r.source, "-n", "-M", "prepared", "-c", strconv.Itoa(pgbenchClients), "-j", "2",
		"-t", strconv.Itoa(pgbenchPerClient(r.scale)))
}

// pgbench runs the pgbench of the run's version against database r.db of c.
func (r *runEnv) pgbench(ctx context.Context, c *testenv.Cluster, args ...string) error {
	bin, err := testenv.Tool(r.version, "pgbench")
	if err != nil {
		return err
	}
	full := append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(c.Port()), "-U", "postgres"}, args...)
	full = append(full, r.db)
	cmd := exec.CommandContext(ctx, bin, full...)
	cmd.Env = append(os.Environ(), "PGSSLMODE=disable")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("running pgbench %s: %w\n%s", strings.Join(args, " "), err, tail(string(out), 20))
	}
	return nil
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
