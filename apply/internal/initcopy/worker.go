package initcopy

import (
	"context"
	"errors"
	"fmt"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/state"
)

// copyWorker is a source connection inside the exported snapshot and a
// target connection.
type copyWorker struct {
	c        *Copier
	src, tgt *pgx.Conn
	point    protocol.LSN
	snapText string // the snapshot as pg_snapshot text, recorded per table
}

func (c *Copier) worker(ctx context.Context, id int, jobs <-chan copyJob, point protocol.LSN, snapshot string) error {
	w := &copyWorker{c: c, point: point}
	var err error
	if w.src, err = c.ConnectSource(ctx, "copy "+strconv.Itoa(id), bufferSourceReads); err != nil {
		return err
	}
	defer w.src.Close(context.WithoutCancel(ctx))
	if err := w.importSnapshot(ctx, snapshot); err != nil {
		return err
	}
	if w.tgt, err = c.ConnectTarget(ctx, "copy "+strconv.Itoa(id)); err != nil {
		return err
	}
	defer w.tgt.Close(context.WithoutCancel(ctx))
	for _, q := range copyTargetSetup {
		if _, err := w.tgt.PgConn().Exec(ctx, q).ReadAll(); err != nil {
			return fmt.Errorf("setting up the target session of the copy (%s): %w", q, err)
		}
	}
	// The copied rows carry a replication origin, as replicated changes
	// do (DESIGN.md invariant 8), so that a peer replicating from the
	// target with origin = none does not send them back. One origin per
	// worker: an origin is set up in one session at a time.
	origin := OriginName(c.Applier, id)
	if err := state.EnsureOrigin(ctx, w.tgt, origin); err != nil {
		return err
	}
	defer w.dropOrigin(ctx, origin)
	if err := state.SessionSetup(ctx, w.tgt, origin); err != nil {
		return err
	}
	for j := range jobs {
		if j.r != nil {
			err = w.copyRange(ctx, j.r)
		} else {
			err = w.copy(ctx, j.t)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// importSnapshot opens the source transaction every table of this worker
// is read in: the slot's exported snapshot, imported while the connection
// that exported it is idle.
func (w *copyWorker) importSnapshot(ctx context.Context, snapshot string) error {
	for _, q := range copySourceSetup {
		if _, err := w.src.PgConn().Exec(ctx, q).ReadAll(); err != nil {
			return fmt.Errorf("setting up the source session of the copy (%s): %w", q, err)
		}
	}
	q := "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY; SET TRANSACTION SNAPSHOT " + sqlgen.QuoteLiteral(snapshot)
	if _, err := w.src.PgConn().Exec(ctx, q).ReadAll(); err != nil {
		return fmt.Errorf("importing snapshot %s on the source: %w", snapshot, err)
	}
	fn := "pg_catalog.pg_current_snapshot()"
	if w.c.Version < 130000 {
		fn = "pg_catalog.txid_current_snapshot()"
	}
	if err := w.src.QueryRow(ctx, "SELECT "+fn+"::text").Scan(&w.snapText); err != nil {
		return fmt.Errorf("reading the imported snapshot on the source: %w", err)
	}
	return w.c.CheckSnapshot(w.snapText)
}

// copy copies one table: COPY TO on the source piped into COPY FROM on the
// target (in chunks, copyPipe; in binary format where the column types
// allow, format.go), in a target transaction that also marks the
// table done. A big table is copied in ranges instead (copyRange).
func (w *copyWorker) copy(ctx context.Context, t *Table) (err error) {
	start := time.Now()
	tgt := w.tgt.PgConn()
	if _, err := tgt.Exec(ctx, "BEGIN").ReadAll(); err != nil {
		return fmt.Errorf("copying table %s: beginning the target transaction: %w", t, err)
	}
	defer func() {
		if err != nil {
			_, _ = tgt.Exec(context.WithoutCancel(ctx), "ROLLBACK").ReadAll()
		}
	}()
	// Checked before, and again here: something may have written into it
	// since, or during an earlier attempt.
	empty, err := targetEmpty(ctx, w.tgt, t)
	if err != nil {
		return err
	}
	if !empty {
		return w.c.NotEmpty(t.String())
	}
	tc, ended := w.c.Prog.copying(t) // progress.go: the table's rows so far
	defer ended()
	freeze, err := w.truncateForFreeze(ctx, t) // freeze.go
	if err != nil {
		return err
	}
	rows, pipe, binary, err := w.moveTable(ctx, t, "", tc, freeze)
	if err != nil {
		return err
	}
	if err := w.markTableDone(ctx, t, rows, pipe.bytes); err != nil {
		return fmt.Errorf("copying table %s: recording it in walapply.copy_state: %w", t, err)
	}
	if _, err = tgt.Exec(ctx, "COMMIT").ReadAll(); err != nil {
		return fmt.Errorf("copying table %s: committing on the target: %w", t, err)
	}
	w.c.Log.Info().Str("relation", t.logName()).Int64("rows", rows).Int64("bytes", pipe.bytes).Str("format", copyFormatName(binary)).
		Float64("seconds", Round1(time.Since(start).Seconds())).Msg("copied table")
	w.c.Prog.tableDone(t, rows, pipe.rows)
	return nil
}

// moveTable pipes the table's rows that meet cond ("" for all) from the
// source into the target, in the target transaction open on the worker's
// target connection, and returns the rows the target took. freeze adds
// COPY's FREEZE option (truncateForFreeze).
func (w *copyWorker) moveTable(ctx context.Context, t *Table, cond string, tc *tableCount, freeze bool) (int64, *copyPipe, bool, error) {
	binary, err := w.binaryCopy(ctx, t)
	if err != nil {
		return 0, nil, false, err
	}
	outSQL, inSQL := t.copyOutSQL(cond), t.copyInSQL()
	switch {
	case binary && freeze:
		outSQL, inSQL = outSQL+" WITH (FORMAT binary)", inSQL+" WITH (FORMAT binary, FREEZE)"
	case binary:
		outSQL, inSQL = outSQL+" WITH (FORMAT binary)", inSQL+" WITH (FORMAT binary)"
	case freeze:
		inSQL += " WITH (FREEZE)"
	}
	pipe := newCopyPipe(w.c.Prog, binary)
	pipe.tc = tc
	tag, srcErr, tgtErr := moveRows(ctx, w.src.PgConn(), w.tgt.PgConn(), outSQL, inSQL, pipe)
	switch {
	case srcErr != nil && !errors.Is(srcErr, errCopyAborted):
		// The target's error, if any, only says the input was cut short.
		return 0, nil, false, fmt.Errorf("copying table %s: reading it on the source: %w", t, srcErr)
	case tgtErr != nil:
		return 0, nil, false, w.c.Refused(t.String(), tgtErr)
	}
	return tag.RowsAffected(), pipe, binary, nil
}

// markTableDone turns the table's copy_state row done (or copied), in the
// target transaction its (last) rows commit in.
func (w *copyWorker) markTableDone(ctx context.Context, t *Table, rows, bytes int64) error {
	res, err := w.tgt.Exec(ctx, `UPDATE walapply.copy_state SET status = $8, rows = $4, bytes = $5,
		copy_lsn = $6::pg_catalog.pg_lsn, snapshot = $7, finished_at = now()
		WHERE applier = $1 AND schema_name = $2 AND table_name = $3 AND status = 'pending'`,
		w.c.Applier, t.Schema, t.Name, rows, bytes, w.point.String(), w.snapText, w.c.doneStatus())
	if err == nil && res.RowsAffected() != 1 {
		err = errors.New("its row is not pending there (did something else change walapply.copy_state?)")
	}
	return err
}

// moveRows runs outSQL (COPY TO) on src into inSQL (COPY FROM) on tgt
// through pipe, and returns the target's command tag and each side's error.
// The first side to fail ends the other: a source error reaches the target
// as the end of its input (CopyFail), a target error makes the source's next
// chunk fail with errCopyAborted.
func moveRows(ctx context.Context, src, tgt *pgconn.PgConn, outSQL, inSQL string, pipe *copyPipe) (tag pgconn.CommandTag, srcErr, tgtErr error) {
	srcDone := make(chan error, 1)
	go func() {
		_, err := src.CopyTo(ctx, pipe, outSQL)
		pipe.closeWrite(err) // nil: the reader sees EOF
		srcDone <- err
	}()
	tag, tgtErr = tgt.CopyFrom(ctx, pipe, inSQL)
	pipe.closeRead()
	return tag, <-srcDone, tgtErr
}
