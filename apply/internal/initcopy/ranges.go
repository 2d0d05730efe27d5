package initcopy

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/apply/internal/sqlgen"
)

// Config.CopySplitSize's defaults: with Config.Schema, tables above
// 256 MiB are copied in ranges, otherwise tables above 1 GiB; with either
// default, balance.go cuts smaller ones too where the copy would wait for
// them.
//
// Ranges keep a copy's workers busy to the end. A table copied whole is one
// worker's job, and the copy takes at least as long as that table: issue
// 20's benchmark (pgbench's accounts of 640 MB and a table of 1.05 GB)
// copied each of its two big tables whole, one worker per table, the
// smaller one's worker idle once it was done. Cut into ranges of at most
// the split size (at least one per worker), shared out largest first
// (planJobs), the workers finish within about one range of each other.
//
// But ranges cost CPU where the target table already has its indexes:
// ranges of one table copied at once insert into the same index at
// several places, and an index page that fills up anywhere but at the
// index's right end is split in half, so the index grows by about 40% more
// pages and the target spends about 20% more CPU (5 million rows of
// pgbench's accounts with their primary key on PostgreSQL 18: 107 against
// 150 MB, 6.0 against 7.3 s, two ranges against one COPY). On a machine
// whose cores are all busy that CPU is what the copy waits for. So the
// smaller size applies only with --schema, which builds the indexes after
// the copy; without it, only tables above 1 GiB are split by size, and
// smaller ones only where one would keep the copy waiting with workers
// idle (balance.go).
// (Either way a key range is read through the key's index, about a
// quarter more source CPU per row than reading the table in order.)
const (
	defaultCopySplitSize   = 1 << 30
	defaultSchemaSplitSize = 256 << 20
)

// copyMaxRanges bounds the ranges of one table.
const copyMaxRanges = 1024

// copyRange is one range of a table copied in ranges.
//
// Big tables are copied in ranges. A table whose source relation is larger
// than Config.CopySplitSize is cut into ranges that the copy workers copy at
// once, each in its own source statement and target transaction, all in
// the same exported snapshot (each worker imports it): together they hold
// exactly the table's rows in that snapshot, as one COPY of the whole table
// would. The ranges are of the table's primary key when it is a single
// integer column (its min and max read in the snapshot, cut into equal
// spans), else of its blocks (ctid ranges, which PostgreSQL 14 and later
// read with a TID range scan: each range reads only its own blocks; the
// number of blocks is read in the snapshot's transaction, and the last
// range is open so that it reads whatever lies past them). A partitioned
// table, or one without an integer key on a source before 14, is copied
// whole.
//
// Each range's rows commit on the target together with its row in
// walapply.copy_ranges turning 'done'; the range that leaves none pending
// also turns the table's copy_state row done, in the same transaction
// (the table's copy_state row is locked first, so that of two ranges
// committing at once the later sees the earlier). A crash keeps the
// ranges done, and the table stays pending.
//
// The attempt after a crash, however, copies in a new snapshot at a later
// point (apply/copy.go), and the copy filter (apply/copy_filter.go) keeps one snapshot
// per table: it cannot tell which stream changes a range copied in the old
// snapshot lacks and which one copied in the new snapshot holds. Keying
// the filter by range would work for key ranges only (a change does not
// carry its ctid) and not for an update that moves a row between ranges.
// So the rule is the simple exact one: a table found with ranges but not
// done is emptied on the target (TRUNCATE, in the transaction that also
// forgets its ranges) and copied again, in ranges, in the new snapshot; the
// tables that were done stay. Ranges make a big table's copy parallel;
// what a crash keeps is the tables finished, not the ranges.
type copyRange struct {
	t      *Table
	no, of int    // range_no from 0, of that many
	by     string // the key column, or "ctid"
	lo, hi *int64 // nil: open
}

func (r *copyRange) String() string { return strconv.Itoa(r.no+1) + "/" + strconv.Itoa(r.of) }

// cond is the range's condition on the source.
func (r *copyRange) cond() string {
	var c []string
	bound := func(op string, v int64) string {
		if r.by == ctidColumn {
			return "ctid " + op + " '(" + strconv.FormatInt(v, 10) + ",0)'::pg_catalog.tid"
		}
		return sqlgen.QuoteIdent(r.by) + " " + op + " " + strconv.FormatInt(v, 10)
	}
	if r.lo != nil {
		c = append(c, bound(">=", *r.lo))
	}
	if r.hi != nil {
		c = append(c, bound("<", *r.hi))
	}
	if len(c) == 0 {
		return ""
	}
	if len(c) == 1 {
		return c[0]
	}
	return c[0] + " AND " + c[1]
}

const ctidColumn = "ctid"

// copyJob is a copy worker's unit of work: a whole table (r nil) or one
// of its ranges.
type copyJob struct {
	t *Table
	r *copyRange
	// work is the job's share of its table's work (tableWork: 0 when
	// the size was not read, splitting being off); the jobs run largest
	// first.
	work int64
}

// MarkRanged sets resetFirst on the tables that have ranges recorded
// but are to be copied again: their rows on the target come from an
// interrupted attempt and are emptied before the copy (not a reason to
// refuse it, CheckTarget).
func MarkRanged(ctx context.Context, q relmap.Querier, applier string, tables []*Table) error {
	rows, err := q.Query(ctx, `SELECT DISTINCT schema_name, table_name FROM walapply.copy_ranges WHERE applier = $1`, applier)
	if err != nil {
		return fmt.Errorf("reading walapply.copy_ranges on the target: %w", err)
	}
	ranged, err := pgx.CollectRows(rows, scanRel)
	if err != nil {
		return fmt.Errorf("reading walapply.copy_ranges on the target: %w", err)
	}
	for _, t := range tables {
		for _, n := range ranged {
			if t.Rel == n {
				t.resetFirst = true
			}
		}
	}
	return nil
}

// SplitSize is the size above which a table is copied in ranges; 0:
// never. set is Config.CopySplitSize; seam, when positive, replaces both
// defaults (apply's SetSplitDefault, for tests); schema is --schema.
// (With --schema and the default, copyWhole may still copy such tables
// whole.)
func SplitSize(set, seam int64, schema bool) int64 {
	switch s := set; {
	case s < 0:
		return 0
	case s == 0 && seam > 0:
		return seam
	case s == 0 && schema:
		return defaultSchemaSplitSize
	case s == 0:
		return defaultCopySplitSize
	default:
		return s
	}
}

// planJobs turns the tables to copy into the workers' jobs, cutting the big
// ones into ranges read in the snapshot (unless copyWhole keeps them whole
// for COPY FREEZE), and records the ranges (emptying first a table an
// interrupted attempt copied part of).
func (c *Copier) planJobs(ctx context.Context, tables []*Table, snapshot string, workers int) ([]copyJob, error) {
	split := c.Split
	var w *copyWorker
	if split > 0 {
		w = &copyWorker{c: c}
		var err error
		if w.src, err = c.ConnectSource(ctx, "copy plan"); err != nil {
			return nil, err
		}
		defer w.src.Close(context.WithoutCancel(ctx))
		if err := w.importSnapshot(ctx, snapshot); err != nil {
			return nil, err
		}
	}
	sizes := make([]tableSize, len(tables))
	if w != nil {
		for i, t := range tables {
			var err error
			if sizes[i], err = w.sizeTable(ctx, t); err != nil {
				return nil, err
			}
		}
	}
	whole := c.copyWhole(tables, sizes, split, workers) // whole.go
	if c.BalanceMin > 0 && c.targetVersion == 0 {
		if err := c.Control.QueryRow(ctx, "SELECT pg_catalog.current_setting('server_version_num')::int").Scan(&c.targetVersion); err != nil {
			return nil, fmt.Errorf("reading the target's server_version_num: %w", err)
		}
	}
	cuts, balanced := c.rangeCounts(tables, sizes, whole, split, workers) // split.go
	var jobs []copyJob
	for i, t := range tables {
		var ranges []*copyRange
		work := tableWork(sizes[i].size, t.estRows)
		if w != nil && cuts[i] > 1 {
			var err error
			if ranges, err = w.cutTable(ctx, t, sizes[i], cuts[i]); err != nil {
				return nil, err
			}
		}
		if t.resetFirst || len(ranges) > 0 {
			if err := c.recordRanges(ctx, t, ranges); err != nil {
				return nil, err
			}
		}
		if len(ranges) == 0 {
			jobs = append(jobs, copyJob{t: t, work: work})
			continue
		}
		reason := "larger than the split size"
		if balanced[i] {
			reason = "balance: copied whole, it would keep the copy waiting while other workers idle"
		}
		c.Log.Info().Str("relation", t.logName()).Int("ranges", len(ranges)).Str("split_by", ranges[0].by).
			Int64("size", sizes[i].size).Int64("estimated_rows", t.estRows).Str("reason", reason).
			Msg("copying table in ranges")
		c.Prog.addRanges(len(ranges))
		for _, r := range ranges {
			jobs = append(jobs, copyJob{t: t, r: r, work: work / int64(len(ranges))})
		}
	}
	// Largest first, a table's ranges in key order (the tables came in
	// order of their row estimates; balance.go weighs rows and bytes).
	slices.SortStableFunc(jobs, func(a, b copyJob) int { return cmp.Compare(b.work, a.work) })
	return jobs, nil
}

// recordRanges records a table's ranges on the target, after emptying it
// and forgetting its earlier ranges when an interrupted attempt copied
// part of it.
func (c *Copier) recordRanges(ctx context.Context, t *Table, ranges []*copyRange) error {
	err := pgx.BeginFunc(ctx, c.Control, func(tx pgx.Tx) error {
		if t.resetFirst {
			if _, err := tx.Exec(ctx, "TRUNCATE "+FromItem(t.String(), t.targetPartitioned)); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `DELETE FROM walapply.copy_ranges WHERE applier = $1 AND schema_name = $2 AND table_name = $3`,
				c.Applier, t.Schema, t.Name); err != nil {
				return err
			}
		}
		if len(ranges) == 0 {
			return nil
		}
		// Checked before, and again here, as a whole table's copy does.
		if empty, err := targetEmpty(ctx, tx, t); err != nil || !empty {
			if err == nil {
				err = c.NotEmpty(t.String())
			}
			return err
		}
		nos := make([]int, len(ranges))
		los, his := make([]*int64, len(ranges)), make([]*int64, len(ranges))
		for i, r := range ranges {
			nos[i], los[i], his[i] = r.no, r.lo, r.hi
		}
		_, err := tx.Exec(ctx, `INSERT INTO walapply.copy_ranges (applier, schema_name, table_name, range_no, split_by, lo, hi)
			SELECT $1, $2, $3, n, $4, lo, hi FROM unnest($5::int[], $6::bigint[], $7::bigint[]) r(n, lo, hi)`,
			c.Applier, t.Schema, t.Name, ranges[0].by, nos, los, his)
		return err
	})
	if err != nil {
		return fmt.Errorf("recording the ranges of table %s in walapply.copy_ranges on the target: %w", t, err)
	}
	if t.resetFirst {
		c.Log.Info().Str("relation", t.logName()).
			Msg("emptied table partly copied in ranges by an interrupted attempt: copying it again in the new snapshot")
		t.resetFirst = false
	}
	return nil
}

// copyRange copies one range of a table, in a target transaction that
// also marks the range done and, when it is the last, the table.
func (w *copyWorker) copyRange(ctx context.Context, r *copyRange) (err error) {
	start := time.Now()
	t := r.t
	tgt := w.tgt.PgConn()
	if _, err := tgt.Exec(ctx, "BEGIN").ReadAll(); err != nil {
		return fmt.Errorf("copying range %s of table %s: beginning the target transaction: %w", r, t, err)
	}
	defer func() {
		if err != nil {
			_, _ = tgt.Exec(context.WithoutCancel(ctx), "ROLLBACK").ReadAll()
		}
	}()
	tc, ended := w.c.Prog.copyingRange(t)
	defer ended()
	rows, pipe, binary, err := w.moveTable(ctx, t, r.cond(), tc, false)
	if err != nil {
		return err
	}
	var left int
	var tableRows, tableBytes int64
	err = func() error {
		// The table's row first: the ranges of one table commit one
		// after the other, and the last sees every other one done.
		if _, err := w.tgt.Exec(ctx, `SELECT 1 FROM walapply.copy_state WHERE applier = $1 AND schema_name = $2 AND table_name = $3 FOR UPDATE`,
			w.c.Applier, t.Schema, t.Name); err != nil {
			return err
		}
		res, err := w.tgt.Exec(ctx, `UPDATE walapply.copy_ranges SET status = 'done', rows = $5, bytes = $6, finished_at = now()
			WHERE applier = $1 AND schema_name = $2 AND table_name = $3 AND range_no = $4 AND status = 'pending'`,
			w.c.Applier, t.Schema, t.Name, r.no, rows, pipe.bytes)
		if err == nil && res.RowsAffected() != 1 {
			err = fmt.Errorf("its row is not pending there (did something else change walapply.copy_ranges?)")
		}
		if err != nil {
			return err
		}
		if err := w.tgt.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status <> 'done'), coalesce(sum(rows), 0), coalesce(sum(bytes), 0)
			FROM walapply.copy_ranges WHERE applier = $1 AND schema_name = $2 AND table_name = $3`,
			w.c.Applier, t.Schema, t.Name).Scan(&left, &tableRows, &tableBytes); err != nil {
			return err
		}
		if left > 0 {
			return nil
		}
		return w.markTableDone(ctx, t, tableRows, tableBytes)
	}()
	if err != nil {
		return fmt.Errorf("copying range %s of table %s: recording it in walapply.copy_ranges: %w", r, t, err)
	}
	if _, err = tgt.Exec(ctx, "COMMIT").ReadAll(); err != nil {
		return fmt.Errorf("copying range %s of table %s: committing on the target: %w", r, t, err)
	}
	w.c.Log.Info().Str("relation", t.logName()).Str("range", r.String()).Str("condition", r.cond()).
		Int64("rows", rows).Int64("bytes", pipe.bytes).Str("format", copyFormatName(binary)).
		Float64("seconds", Round1(time.Since(start).Seconds())).Msg("copied range")
	w.c.Prog.rangeDone(rows, pipe.rows)
	if left == 0 {
		w.c.Log.Info().Str("relation", t.logName()).Int64("rows", tableRows).Int64("bytes", tableBytes).
			Int("ranges", r.of).Msg("copied table")
		w.c.Prog.tableDone(t, tableRows, tableRows)
	}
	return nil
}
