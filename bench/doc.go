// Package bench is the side-by-side throughput harness of issue 6: it
// measures how long walapply takes to drain a replication backlog next to
// PostgreSQL's built-in subscriber, on identical fresh databases.
//
// # Method
//
// Every measurement ("run") starts a fresh source and target cluster
// (testenv, on 127.0.0.1), creates the workload's schema on both sides
// (with identical initial data where the workload has any), a marker table,
// a publication p FOR ALL TABLES on the source and then the pgoutput slot x.
// Only then does the workload run on the source, with no applier attached,
// so the backlog is exactly the workload's transactions followed by one
// marker row. Before draining, the source's decode ceiling is timed with
// pg_logical_slot_peek_binary_changes on slot x (peek does not consume:
// the appliers see the same backlog). Then one applier drains the slot, and
// the time from its start to the marker row's appearance on the target is
// the run's figure:
//
//   - builtin: CREATE SUBSCRIPTION on the target with create_slot = false,
//     slot_name = 'x', copy_data = false and streaming on for the bulk
//     workload (off elsewhere: nothing else exceeds
//     logical_decoding_work_mem, and explicit values keep PostgreSQL 15 and
//     18 comparable, since 18's default is parallel);
//   - walapply: the walapply binary (built once per harness invocation) as a
//     child process; its peak resident set (VmHWM of /proc/<pid>/status
//     just before SIGTERM) is recorded. Not rusage's maxrss: Linux folds
//     the high-water mark of the memory the child had before exec (with
//     Go's vfork-style start, the harness's) into it.
//
// After every run all tables of schema public are compared row by row
// (ordered by primary key, the md5 of each row's text) between source and
// target; any difference fails the run, loudly. Builtin and walapply runs
// alternate (B W, W B, B W, …) so that drift of a noisy machine touches both.
//
// # Workloads
//
// pgbench (TPC-B, scale 10, 100k transactions from 4 clients; a primary key
// added to pgbench_history; pgbench -i runs on both sides before the slot,
// so the backlog is exactly the 100k transactions), small (200k single-row
// INSERT transactions), bulk (one transaction of 2M rows), toast (20k
// updates of a small column in 1000 rows that each carry a 100 kB value
// stored out of line) and mixed (50 tables of mixed types, 50k transactions
// touching 1–5 of them), and copy, the initial copy (copy.go: 3M narrow rows
// and 300k rows of about 1 kB on the source before any slot exists, an
// empty target with the schema; builtin subscribes with copy_data = true,
// walapply runs with --copy --create-slot; no decode ceiling, the report
// gives MB/s, rows/s and walapply's CPU per MB and write(2)s instead).
// Options.Scale shrinks every count for smoke runs.
//
// # Neighbour load
//
// Options.Neighbour (walbench --neighbour cores|N) runs that many CPU-bound
// processes beside every timed drain, of both appliers alike, started
// before the drain's counters and killed after it (neighbour.go); the
// report names them and gives the 1-minute load average at the drains'
// ends.
//
// Run is the entry point; bench/cmd/walbench is its command line and
// `make bench` / `make bench-smoke` call it.
//
// # The runbook
//
// Runbook (runbook.go) is of another shape: walapply alone, issue 20's
// whole migration path once, each phase timed (copy and follow, stop
// writes, cut-over, compare, sequences), on a source written to during
// the whole run; bench/cmd/runbook is its command line and
// `make bench-runbook` calls it.
package bench
