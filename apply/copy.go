package apply

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/apply/internal/engine"
	"github.com/walapply/walapply/apply/internal/initcopy"
	"github.com/walapply/walapply/internal/secret"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/state"
)

// initialCopy runs or resumes the initial copy when Config.Copy asks for
// it, and refuses to stream for an applier whose copy is unfinished. It
// runs after the applier is registered and before the slot is looked up
// and streaming starts (run.go's connect).
//
// The initial copy (walapply run --copy) makes a new applier's target a
// copy of the source's published tables and then follows the source, with
// no row missed and none applied twice, also while the source is written
// to.
//
// It works as PostgreSQL's subscription does. The slot is created with an
// exported snapshot, which shows the database exactly as of the slot's
// consistent point P1: every transaction that committed before P1, none
// after. Workers import that snapshot on their own source connections
// (SET TRANSACTION SNAPSHOT) and pipe each table's rows from COPY TO on the
// source into COPY FROM on the target, several tables at once. Once every
// table is copied, the applier's replication origin is set to P1 and
// streaming starts there: the stream brings exactly the transactions the
// snapshot did not hold.
//
// Each table's copy commits on the target in one transaction together with
// its row in walapply.copy_state turning 'done'; a crash rolls back the
// table it was copying, and the next attempt copies only the tables not
// done. That attempt cannot use the first snapshot again: an exported
// snapshot can be imported only while the connection that created the slot
// is open and idle. The unfinished tables are therefore copied in a new
// snapshot, exported by a temporary slot at a later point P2, while the
// slot, its P1 and the finished tables stay. Streaming still starts at P1,
// and the changes the new copies already hold are skipped, per table, by
// the rule of engine.CopyFilter. The slot itself must survive for that; if it
// is gone, the copy cannot be resumed and says how to start over.
//
// Everything that can be checked before copying is checked first: every
// published table exists on the target with every published column, and
// the tables to copy are empty. The problems are reported all at once.
//
// What a start does (initcopy.Decide), the tables and their check, the
// workers, the ranges, the pipe and the progress are internal/initcopy's;
// apply keeps the slot, --schema's sections, the origin and the record in
// walapply.copies, and makes the package's errors and progress its own.
func (s *session) initialCopy(ctx context.Context) error {
	cfg := s.cfg
	rec, err := initcopy.ReadRecord(ctx, s.control, cfg.Name)
	if err != nil {
		return err
	}
	if !cfg.Copy || rec.Finished {
		_, err := planCopy(initcopy.Facts{Asked: cfg.Copy, Applier: cfg.Name, Slot: cfg.Slot, Rec: rec})
		return err
	}
	origin, _, err := state.OriginProgress(ctx, s.control, s.origin, false)
	if err != nil {
		return err
	}
	// A replication connection of its own: it creates the slot (or the
	// temporary one of a resumed copy) and then stays idle, which keeps
	// the exported snapshot importable, until every table is copied.
	rc, err := protocol.ConnectReplication(ctx, cfg.Source, cfg.replicationName("copy slot"))
	if err != nil {
		return fmt.Errorf("connecting to the source for the initial copy: %w", err)
	}
	defer rc.Close(context.WithoutCancel(ctx))
	st, found, err := rc.Slot(ctx, cfg.Slot)
	if err != nil {
		return fmt.Errorf("looking up replication slot %q on the source: %w", cfg.Slot, err)
	}
	act, err := planCopy(initcopy.Facts{Asked: true, Applier: cfg.Name, Slot: cfg.Slot, Rec: rec,
		SlotFound: found, SlotFlush: st.ConfirmedFlush, Origin: origin})
	if err != nil || act == initcopy.Nothing {
		return err
	}
	c := &copier{cfg: cfg, control: s.control, origin: s.origin, rc: rc, act: act, rec: rec, slotActive: found && st.Active}
	return c.run(ctx)
}

// copier runs one attempt at the initial copy.
type copier struct {
	cfg        *Config
	control    *pgx.Conn // target: walapply's tables, the origin
	origin     string
	rc         *protocol.ReplConn
	act        initcopy.Action
	rec        initcopy.Record
	slotActive bool

	// copiedAs is the state a table's copy commits in: "done", or
	// "copied" for a table copied while the stream goes on (refresh_sync.go).
	copiedAs string
	// created are the tables this attempt's pre-data created (--schema),
	// which the copy may truncate for COPY FREEZE (initcopy/freeze.go).
	created map[initcopy.Rel]bool

	src     *pgx.Conn // source: the catalog
	version int       // the source's server_version_num
	prog    *initcopy.Progress
	post    *postDataRun // --schema's post-data section, when it is due
}

func (c *copier) run(ctx context.Context) error {
	cfg, log := c.cfg, c.cfg.Logger
	var err error
	if c.src, err = connectSource(ctx, cfg, "copy"); err != nil {
		return err
	}
	defer c.src.Close(context.WithoutCancel(ctx))
	c.version = c.rc.ServerVersion()

	tables, err := listPublishedTables(ctx, c.src, cfg.Publications, c.version)
	if err != nil {
		return err
	}
	todo, err := initcopy.Todo(ctx, c.control, cfg.Name, tables, c.act == initcopy.Resume)
	if err != nil {
		return err
	}
	// With --schema, the tables are created first (schema.go), unless an
	// earlier attempt did or the copy began without --schema.
	if cfg.Schema && c.rec.SchemaPhase == "" && c.act != initcopy.Resume {
		plan, err := planSchema(ctx, c.src, c.control, tables)
		if err != nil {
			return err
		}
		if err := c.preData(ctx, plan); err != nil {
			return err
		}
		c.created = map[initcopy.Rel]bool{}
		for _, t := range plan.tables {
			c.created[t.Rel] = true
		}
	}
	// Everything that can be wrong with the target, at once, before
	// anything is created or copied.
	if err := checkTargetTables(ctx, c.control, tables, todo); err != nil {
		return err
	}

	// point is where the snapshot the tables are copied in stands: the
	// slot's consistent point, where streaming starts (c.rec.Point), or
	// for a resumed copy a later one.
	point, snapshot := c.rec.Point, ""
	switch c.act {
	case initcopy.Fresh, initcopy.Recreate:
		if point, snapshot, err = c.createSlot(ctx, tables); err != nil {
			return err
		}
		c.rec.Point = point
	case initcopy.Resume:
		if err := initcopy.SyncTableList(ctx, c.control, cfg.Name, tables); err != nil {
			return err
		}
		if len(todo) > 0 {
			if point, snapshot, err = c.createTempSlot(ctx); err != nil {
				return err
			}
		}
	}
	log.Info().Str("slot", cfg.Slot).Str("mode", c.act.String()).Int("tables", len(tables)).Int("to_copy", len(todo)).
		Stringer("snapshot_lsn", point).Msg("initial copy: copying the published tables")

	// With --schema, a table's index builds begin as soon as it is copied
	// (schema.EarlyBuilds); a failing one stops the copy.
	copyCtx, stopCopy := context.WithCancelCause(ctx)
	defer stopCopy(nil)
	if cfg.Schema && c.rec.SchemaPhase != schemaPostData {
		if c.post, err = c.startPostData(ctx, tables, stopCopy); err != nil {
			return err
		}
	}
	c.prog = newCopyProgress(cfg, len(tables), len(tables)-len(todo), todo)
	c.prog.OnCopied(c.tableCopied)
	stopReports := c.prog.Report(ctx)
	err = c.copyTables(copyCtx, todo, point, snapshot)
	stopReports()
	if err != nil {
		// The builds under way stop too. If a build's failure stopped the
		// copy, that failure is the cause, and the error to report.
		stopCopy(err)
		if c.post != nil {
			_, _ = c.post.early.Finish()
			err = postDataError(context.Cause(copyCtx))
		}
		return err
	}
	// The snapshot is no longer needed: the temporary slot of a resumed
	// copy goes with the connection.
	_ = c.rc.Close(ctx)
	if c.post != nil {
		if err := c.postData(ctx, c.post); err != nil {
			return err
		}
	}
	return c.finish(ctx)
}

// copyTables copies tables in the snapshot exported at point: the
// package's Copier, with the applier's configuration, connections and
// error kinds (initcopy.Copier.CopyTables).
func (c *copier) copyTables(ctx context.Context, tables []*initcopy.Table, point protocol.LSN, snapshot string) error {
	cfg := c.cfg
	ic := &initcopy.Copier{
		Applier: cfg.Name, Control: c.control, Version: c.version, Log: cfg.Logger, Prog: c.prog,
		Workers: cfg.CopyWorkers, Split: initcopy.SplitSize(cfg.CopySplitSize, cfg.splitDefault, cfg.Schema), SetSplit: cfg.CopySplitSize,
		BalanceMin: initcopy.BalanceMin(cfg.CopySplitSize, cfg.balanceMin),
		Schema:     cfg.Schema, Text: cfg.CopyFormat == CopyFormatText, DoneAs: c.copiedAs, Created: c.created,
		ConnectSource: func(ctx context.Context, role string, tune ...func(*pgx.ConnConfig)) (*pgx.Conn, error) {
			return connectSource(ctx, cfg, role, tune...)
		},
		ConnectTarget: func(ctx context.Context, role string) (*pgx.Conn, error) { return connectTarget(ctx, cfg, role) },
		NotEmpty: func(table string) error {
			return &PermanentError{Err: &CopyCheckError{NotEmpty: []string{table}}}
		},
		Refused: func(relation string, err error) error {
			return &TxnError{Op: OpInitialCopy, Relation: relation, Err: err}
		},
		CheckSnapshot: func(text string) error { _, err := engine.ParseSnapshot(text); return err },
	}
	return ic.CopyTables(ctx, tables, point, snapshot)
}

// createSlot creates the applier's slot with an exported snapshot, after
// recording that it is being created (so that a crash in between leaves a
// slot the next attempt knows to be its own), and records the tables to
// copy.
func (c *copier) createSlot(ctx context.Context, tables []*initcopy.Table) (protocol.LSN, string, error) {
	cfg := c.cfg
	if c.act == initcopy.Recreate {
		if c.slotActive {
			return 0, "", fmt.Errorf("replication slot %q, left by an interrupted initial copy, is in use by another connection", cfg.Slot)
		}
		if err := c.rc.DropSlot(ctx, cfg.Slot, false); err != nil && !isUndefinedObject(err) {
			return 0, "", fmt.Errorf("dropping replication slot %q, left by an interrupted initial copy: %w", cfg.Slot, err)
		}
	}
	_, err := c.control.Exec(ctx, `INSERT INTO walapply.copies (applier, slot_name) VALUES ($1, $2)
		ON CONFLICT (applier) DO UPDATE SET slot_name = EXCLUDED.slot_name, consistent_point = NULL, started_at = now(), finished_at = NULL`, cfg.Name, cfg.Slot)
	if err != nil {
		return 0, "", fmt.Errorf("recording the initial copy in walapply.copies on the target: %w", err)
	}
	info, err := c.rc.CreateSlot(ctx, cfg.Slot, slotOptions(cfg, "export"))
	if err != nil {
		return 0, "", fmt.Errorf("creating replication slot %q on the source: %w", cfg.Slot, err)
	}
	cfg.Logger.Info().Str("slot", info.Name).Stringer("consistent_point", info.ConsistentPoint).Str("snapshot", info.SnapshotName).
		Msg("created replication slot with an exported snapshot")
	err = pgx.BeginFunc(ctx, c.control, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE walapply.copies SET consistent_point = $2::pg_catalog.pg_lsn WHERE applier = $1`, cfg.Name, info.ConsistentPoint.String()); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM walapply.copy_state WHERE applier = $1`, cfg.Name); err != nil {
			return err
		}
		return initcopy.InsertPending(ctx, tx, cfg.Name, tables)
	})
	if err != nil {
		return 0, "", fmt.Errorf("recording the slot's consistent point in walapply.copies on the target: %w", err)
	}
	return info.ConsistentPoint, info.SnapshotName, nil
}

// createTempSlot creates a temporary slot for a resumed copy (or for
// tables published later, refresh.go), only for the snapshot it exports;
// it vanishes with the connection.
func (c *copier) createTempSlot(ctx context.Context) (protocol.LSN, string, error) {
	name := tempSlotName(c.cfg.Slot, os.Getpid())
	info, err := c.rc.CreateSlot(ctx, name, protocol.SlotOptions{Temporary: true, Snapshot: "export"})
	if err != nil {
		return 0, "", fmt.Errorf("creating temporary replication slot %q on the source for a new snapshot: %w", name, err)
	}
	c.cfg.Logger.Info().Str("slot", name).Stringer("consistent_point", info.ConsistentPoint).
		Msg("created a temporary replication slot for a new snapshot; changes it already holds are skipped from the stream")
	return info.ConsistentPoint, info.SnapshotName, nil
}

// tempSlotName names the temporary slot of a resumed copy: a valid slot
// name however long the applier's slot name is.
func tempSlotName(slot string, pid int) string {
	suffix := "_copy_" + strconv.Itoa(pid)
	if len(slot)+len(suffix) > protocol.MaxSlotNameLen {
		slot = slot[:protocol.MaxSlotNameLen-len(suffix)]
	}
	return slot + suffix
}

// finish sets the origin to the slot's consistent point, where streaming
// starts, and marks the copy finished. A crash in between repeats both.
func (c *copier) finish(ctx context.Context) error {
	cfg := c.cfg
	if err := initcopy.DropOrigins(ctx, c.control, cfg.Name); err != nil {
		return err
	}
	if err := state.AdvanceOrigin(ctx, c.control, c.origin, c.rec.Point); err != nil {
		return err
	}
	if _, err := c.control.Exec(ctx, `UPDATE walapply.copies SET finished_at = now() WHERE applier = $1`, cfg.Name); err != nil {
		return fmt.Errorf("marking the initial copy finished in walapply.copies on the target: %w", err)
	}
	p := c.prog.Snapshot(true)
	cfg.Logger.Info().Int("tables", p.TablesTotal).Int64("rows", p.Rows).Int64("bytes", p.Bytes).
		Float64("seconds", initcopy.Round1(p.Elapsed.Seconds())).Stringer("start_lsn", c.rec.Point).
		Msg("initial copy complete; streaming from the slot's consistent point")
	c.prog.Tell(p)
	return nil
}

// connectSource opens an ordinary (not replication) source connection;
// tune, if given, adjusts its configuration first.
func connectSource(ctx context.Context, cfg *Config, role string, tune ...func(*pgx.ConnConfig)) (*pgx.Conn, error) {
	pc, err := pgx.ParseConfig(cfg.Source)
	if err != nil {
		return nil, fmt.Errorf("%w: source connection string: %v", ErrConfig, secret.Error(err, cfg.Source))
	}
	pc.RuntimeParams["application_name"] = "walapply " + cfg.Name + " " + role
	for _, f := range tune {
		f(pc)
	}
	conn, err := pgx.ConnectConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("connecting to the source (%s): %w", role, secret.Error(explainConnect(err), cfg.Source)) // connect_errors.go
	}
	return conn, nil
}

func isUndefinedObject(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42704"
}
