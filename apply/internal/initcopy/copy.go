package initcopy

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"
	"github.com/walapply/walapply/protocol"
)

// Copier copies tables into the target in a snapshot exported on the
// source: one attempt at the initial copy, or a copy of tables published
// later (apply/copy.go and apply/refresh*.go set it up and decide when).
// It owns the copy's workers, its plan of whole tables and ranges, and
// the tables' and ranges' rows in walapply.copy_state and
// walapply.copy_ranges; it reaches the servers only through the
// connections it is given or opens with Connect*, and makes its errors
// apply's through NotEmpty and Refused.
type Copier struct {
	Applier string
	Control *pgx.Conn // target: walapply's tables, the copy workers' origins
	Version int       // the source's server_version_num
	Log     zerolog.Logger
	Prog    *Progress

	// Workers is how many tables or ranges are copied at once (default 2).
	Workers int
	// Split is the size above which a table is copied in ranges
	// (SplitSize), SetSplit Config.CopySplitSize as set.
	Split, SetSplit int64
	// BalanceMin is the smallest range, in work (balance.go), that the
	// copy cuts so that its workers end together; 0: no balancing (the
	// split size set, or splitting off).
	BalanceMin int64
	// targetVersion is the target's server_version_num, read by
	// planJobs when it balances (balance.go: not before 16).
	targetVersion int
	// Schema: --schema, which builds the indexes after the copy.
	Schema bool
	// Text: always copy in text format (Config.CopyFormat "text").
	Text bool
	// DoneAs is the state a table's copy commits in: StatusDone, or
	// StatusCopied for a table copied while the stream goes on
	// (apply/refresh_sync.go); "" is StatusDone.
	DoneAs string
	// Created are the tables this attempt's pre-data created (--schema),
	// which the copy may truncate for COPY FREEZE (freeze.go).
	Created map[Rel]bool

	// ConnectSource opens a plain source connection for role, tune
	// adjusting its configuration first; ConnectTarget a target one.
	ConnectSource func(ctx context.Context, role string, tune ...func(*pgx.ConnConfig)) (*pgx.Conn, error)
	ConnectTarget func(ctx context.Context, role string) (*pgx.Conn, error)
	// NotEmpty is the error of a table to copy found not empty in its
	// copy's transaction; Refused that of the target refusing its rows.
	NotEmpty func(table string) error
	Refused  func(relation string, err error) error
	// CheckSnapshot is the copy filter's reading of a snapshot's text
	// (apply/copy_filter.go): a snapshot that it could not read when the
	// stream comes is refused before any table is copied in it.
	CheckSnapshot func(text string) error
}

// doneStatus is the state a table's copy commits in.
func (c *Copier) doneStatus() string {
	if c.DoneAs != "" {
		return c.DoneAs
	}
	return StatusDone
}

// Sessions of the copy. The source writes values in the forms the target
// reads back unchanged (as the applier's source sessions do: ISO dates,
// every float digit); the target session behaves like the applier's
// (DESIGN.md invariant 8): no ordinary triggers or foreign key checks, so
// tables can be copied in any order. Its commits need not wait for the
// disk: finishing the copy commits synchronously on the control
// connection, which makes every earlier commit durable with it, and a
// table whose commit a target crash loses loses its 'done' row with it and
// is copied again.
var (
	copySourceSetup = []string{
		"SET DateStyle = ISO",
		"SET IntervalStyle = postgres",
		"SET extra_float_digits = 3",
		"SET statement_timeout = 0",
		"SET idle_in_transaction_session_timeout = 0",
	}
	copyTargetSetup = []string{
		"SET session_replication_role = replica",
		"SET synchronous_commit = off",
		"SET DateStyle = ISO",
		"SET IntervalStyle = postgres",
		"SET statement_timeout = 0",
		"SET lock_timeout = 0",
		"SET idle_in_transaction_session_timeout = 0",
	}
)

// errCopyAborted ends the source side of a table's copy (its writes into
// the copyPipe) when the target side failed first.
var errCopyAborted = errors.New("apply: the target side of the copy failed")

// Round1 rounds to a tenth, for the seconds and rates in log lines (this
// package's and apply's).
func Round1(x float64) float64 { return math.Round(x*10) / 10 }

// CopyTables copies tables in the snapshot exported at point, with
// c.Workers workers (default 2), largest tables first; the workers copy
// whole tables and the ranges of big ones alike (ranges.go), so Workers
// bounds the whole copy. The first failure stops every worker.
func (c *Copier) CopyTables(ctx context.Context, tables []*Table, point protocol.LSN, snapshot string) error {
	if len(tables) == 0 {
		return nil
	}
	tables = slices.Clone(tables)
	slices.SortStableFunc(tables, func(a, b *Table) int { return cmp.Compare(b.estRows, a.estRows) })
	n := c.Workers
	if n <= 0 {
		n = 2
	}
	todo, err := c.planJobs(ctx, tables, snapshot, n)
	if err != nil {
		return err
	}
	n = min(n, len(todo))

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	jobs := make(chan copyJob)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if errs[i] = c.worker(ctx, i+1, jobs, point, snapshot); errs[i] != nil {
				cancel(errs[i])
			}
		})
	}
feed:
	for _, j := range todo {
		select {
		case jobs <- j:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	if context.Cause(ctx) != nil {
		c.dropLeftCopyOrigins(ctx)
	}
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err // the first worker's failure
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return ctx.Err()
}
