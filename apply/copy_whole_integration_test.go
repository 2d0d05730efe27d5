package apply_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"
	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/internal/testutil"
)

// wholeLog is the message of copyWhole's decision.
const wholeLog = "copying big tables whole, with COPY FREEZE, not in ranges"

// copyWholeRun runs a --schema copy of publication pub as applier slot
// with workers copy workers, tables above 64 kB counting as big (the
// default's rule at a test's size), until its copy is done, and returns
// its log.
func (h *harness) copyWholeRun(slot, pub string, workers int) *testutil.LogBuffer {
	h.t.Helper()
	cfg := h.config(slot, pub)
	cfg.Copy, cfg.Schema, cfg.CopyWorkers = true, true, workers
	apply.SetSplitDefault(&cfg, 64<<10)
	logs := &testutil.LogBuffer{}
	cfg.Logger = zerolog.New(zerolog.MultiLevelWriter(zerolog.NewTestWriter(h.t), logs)).Level(zerolog.InfoLevel)
	stop := h.runApplier(cfg)
	h.pollTarget(2*time.Minute, nil, "the initial copy of applier "+slot, func(conn *pgx.Conn) (bool, error) {
		var done bool
		err := conn.QueryRow(h.ctx, `SELECT EXISTS (SELECT 1 FROM walapply.copies WHERE applier = $1 AND finished_at IS NOT NULL)`, slot).Scan(&done)
		if err != nil && strings.Contains(err.Error(), "does not exist") {
			return false, nil
		}
		return done, err
	})
	h.waitCopies(slot, time.Minute)
	if err := stop(); err != nil && !errors.Is(err, context.Canceled) {
		h.t.Fatal(err)
	}
	return logs
}

// TestCopySchemaWhole: with --schema and the default split size, two big
// tables on two copy workers are copied whole, each with COPY FREEZE
// (every page all-frozen, no ranges recorded, the decision logged naming
// both); two big tables on three workers are copied in ranges (ranges
// recorded, pages not frozen, no such log line). Both appliers copy into
// the same target, one after the other; every table's rows are the
// source's.
func TestCopySchemaWhole(t *testing.T) {
	t.Parallel()
	schemaPairs(t, func(t *testing.T, h *harness) {
		var sqls []string
		for _, tbl := range []string{"w1", "w2", "r1", "r2"} {
			sqls = append(sqls, fmt.Sprintf(`CREATE TABLE %s (id int PRIMARY KEY, pad text NOT NULL)`, tbl),
				fmt.Sprintf(`INSERT INTO %s SELECT g, md5(g::text) FROM generate_series(1, 4000) g`, tbl))
		}
		h.source(append(sqls, `CREATE PUBLICATION wpub FOR TABLE w1, w2`, `CREATE PUBLICATION rpub FOR TABLE r1, r2`)...)
		h.target(`CREATE EXTENSION pg_visibility`)

		logs := h.copyWholeRun("wslot", "wpub", 2)
		if n := logs.Count(wholeLog, "public.w1", "public.w2", `"copy_workers":2`); n != 1 {
			t.Errorf("two big tables, two workers: %d log lines %q naming w1 and w2, want 1; log:\n%s", n, wholeLog, logs)
		}
		logs = h.copyWholeRun("rslot", "rpub", 3)
		if n := logs.Count(wholeLog); n != 0 {
			t.Errorf("two big tables, three workers: %d log lines %q, want none", n, wholeLog)
		}

		h.expect(`SELECT applier || ' ' || table_name || ' ' || (count(*) >= 3)::text FROM walapply.copy_ranges GROUP BY applier, table_name`,
			"rslot r1 true", "rslot r2 true")
		for _, c := range []struct{ table, want string }{{"w1", "true|"}, {"w2", "true|"}, {"r1", "false|"}, {"r2", "false|"}} {
			if got := h.scalar(false, fmt.Sprintf(frozenSQL, c.table)); !strings.HasPrefix(got, c.want) {
				t.Errorf("%s: all-frozen|frozen pages|pages = %s, want %s...", c.table, got, c.want)
			}
			if n := h.compare(tableRows(c.table, "")); n == 0 {
				t.Errorf("%s: no rows compared", c.table)
			}
		}
	})
}
