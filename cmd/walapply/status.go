package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/internal/secret"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/state"
	"github.com/walapply/walapply/twophase"
)

func init() {
	register("status", command{summary: "show appliers' progress, the source slot's lag, pending prepared transactions and spill files", run: statusCmd})
}

// statusFlags are the flags of 'walapply status'.
type statusFlags struct {
	target, source, name, spillDir string
	json                           bool
}

func statusCmd(ctx context.Context, args []string) error {
	return statusMain(ctx, args, os.Stdout, os.Stderr)
}

// statusMain is the status command with its output streams. It only reads:
// nothing on the target or the source is changed (no migration, no origin
// created, no WAL flushed).
func statusMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("status")
	fs.SetOutput(stderr)
	var f statusFlags
	fs.StringVar(&f.target, "target", "", "target connection string")
	fs.StringVar(&f.source, "source", "", "source connection string: adds the slot's lag (optional)")
	fs.StringVar(&f.name, "name", "", "the applier to show (default: every applier recorded on the target)")
	fs.StringVar(&f.spillDir, "spill-dir", "", "the applier's spill directory, to list the spill files in it (optional)")
	fs.BoolVar(&f.json, "json", false, "print one JSON object instead of text")
	if err := parseWithEnv(fs, args, "target"); err != nil {
		return err
	}
	rep, err := gatherStatus(ctx, f)
	if err != nil {
		return err
	}
	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return writeStatusText(stdout, rep, time.Now())
}

// statusReport is what status prints; with --json exactly this.
type statusReport struct {
	Appliers []applierStatus `json:"appliers"`
	Spill    *spillStatus    `json:"spill,omitempty"`
}

type applierStatus struct {
	Name           string     `json:"name"`
	Slot           string     `json:"slot"`
	Publications   []string   `json:"publications"`
	SourceSystemID string     `json:"source_system_id"`
	SourceTimeline int32      `json:"source_timeline"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      *time.Time `json:"updated_at,omitempty"`

	Origin originStatus `json:"origin"`
	// Sessions are the applier's connections to the target: a running
	// applier has an "apply" and a "control" session.
	Sessions []sessionStatus  `json:"target_sessions"`
	Prepared []preparedStatus `json:"prepared_transactions"`
	Copy     *copyStatus      `json:"initial_copy,omitempty"` // nil: no initial copy was made
	Until    *untilStatus     `json:"until,omitempty"`        // nil: the latest start had no --until
	Source   *sourceStatus    `json:"source,omitempty"`

	// Tables are the published tables the applier knows and the state of
	// each, like pg_subscription_rel (status_tables.go).
	Tables []tableStatus `json:"tables"`
}

type originStatus struct {
	Name   string `json:"name"`
	Exists bool   `json:"exists"`
	// Progress is the end LSN of the last source transaction committed on
	// the target (not flushed first: status changes nothing); empty if the
	// origin never advanced.
	Progress string `json:"progress_lsn,omitempty"`
	// LocalLSN is the target's own LSN of that commit, when the server
	// still has it in memory (pg_replication_origin_status) and the role
	// may read that view.
	LocalLSN string `json:"local_lsn,omitempty"`
}

type sessionStatus struct {
	Role  string    `json:"role"`
	PID   int32     `json:"pid"`
	Since time.Time `json:"since"`
}

type preparedStatus struct {
	GID       string    `json:"gid"`
	SourceXid uint32    `json:"source_xid"`
	Prepared  time.Time `json:"prepared_at"`
	Owner     string    `json:"owner"`
	Database  string    `json:"database"`
}

type sourceStatus struct {
	SystemID string `json:"system_id,omitempty"`
	// SystemIDMatches is false when the source is not the cluster the
	// applier replicates from (then the slot numbers mean nothing for it).
	SystemIDMatches *bool       `json:"system_id_matches,omitempty"`
	CurrentLSN      string      `json:"current_lsn"`
	Slot            *slotStatus `json:"slot"` // nil: the slot does not exist
	// SlotMissing: the applier's slot does not exist on the source (an
	// applier that never got to create it, or whose slot was dropped).
	SlotMissing bool `json:"slot_missing"`
}

type slotStatus struct {
	Plugin            string `json:"plugin"`
	Database          string `json:"database"`
	Active            bool   `json:"active"`
	ActivePID         *int32 `json:"active_pid,omitempty"`
	RestartLSN        string `json:"restart_lsn,omitempty"`
	ConfirmedFlushLSN string `json:"confirmed_lsn,omitempty"` // the slot's confirmed_flush_lsn: one name with the log and metrics
	WALStatus         string `json:"wal_status,omitempty"`
	// LagBytes is current_lsn - confirmed_flush_lsn: source WAL not yet
	// confirmed as applied and durable on the target.
	LagBytes *int64 `json:"lag_bytes,omitempty"`
	// RetainedBytes is current_lsn - restart_lsn: WAL the slot keeps on
	// the source.
	RetainedBytes *int64 `json:"retained_bytes,omitempty"`
	// LagSeconds is the walsender's flush_lag (pg_stat_replication): how
	// long the applier took to confirm recent WAL as durable. Only while
	// the applier is connected; 0 when there is no lag in bytes.
	LagSeconds *float64   `json:"lag_seconds,omitempty"`
	ReplyTime  *time.Time `json:"last_reply_at,omitempty"`
	// LagFrom says where LagSeconds comes from, LagNote why it is absent
	// (status_lag.go).
	LagFrom string `json:"lag_seconds_from,omitempty"`
	LagNote string `json:"lag_note,omitempty"`
	// Failover and Synced are pg_replication_slots' columns (PostgreSQL
	// 17+; absent before): see status_failover.go.
	Failover *bool `json:"failover,omitempty"`
	Synced   *bool `json:"synced,omitempty"`
}

type spillStatus struct {
	Dir    string      `json:"dir"`
	Exists bool        `json:"exists"`
	Files  []spillFile `json:"files"`
	Bytes  int64       `json:"bytes"`
}

type spillFile struct {
	Name     string    `json:"name"`
	Xid      uint32    `json:"xid"`
	Bytes    int64     `json:"bytes"`
	Modified time.Time `json:"modified_at"`
}

// gatherStatus reads everything status shows.
func gatherStatus(ctx context.Context, f statusFlags) (*statusReport, error) {
	target, err := connectPlain(ctx, f.target)
	if err != nil {
		return nil, fmt.Errorf("connecting to the target: %w", err)
	}
	defer target.Close(context.WithoutCancel(ctx))
	rep := &statusReport{Appliers: []applierStatus{}}
	if rep.Appliers, err = readAppliers(ctx, target, f.name); err != nil {
		return nil, err
	}
	for i := range rep.Appliers {
		if err := readTargetState(ctx, target, &rep.Appliers[i]); err != nil {
			return nil, err
		}
	}
	if f.source != "" {
		source, err := connectPlain(ctx, f.source)
		if err != nil {
			return nil, fmt.Errorf("connecting to the source: %w", err)
		}
		defer source.Close(context.WithoutCancel(ctx))
		for i := range rep.Appliers {
			if rep.Appliers[i].Source, err = readSourceState(ctx, source, &rep.Appliers[i]); err != nil {
				return nil, err
			}
			if err := readCopyEstimates(ctx, source, &rep.Appliers[i]); err != nil {
				return nil, err
			}
		}
	}
	if f.spillDir != "" {
		if rep.Spill, err = readSpillDir(f.spillDir); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// connectPlain connects for ordinary queries, dropping a replication
// parameter from the connection string (the same string as run's --source
// may carry one). Its errors show no piece of a password (package secret).
func connectPlain(ctx context.Context, connString string) (*pgx.Conn, error) {
	pc, err := pgx.ParseConfig(connString)
	if err != nil {
		return nil, secret.Error(err, connString)
	}
	delete(pc.RuntimeParams, "replication")
	conn, err := pgx.ConnectConfig(ctx, pc)
	return conn, secret.Error(err, connString)
}

// readAppliers reads what the target's walapply schema records of every
// applier, or of the named one (apply.ReadRegistered).
func readAppliers(ctx context.Context, conn *pgx.Conn, name string) ([]applierStatus, error) {
	regs, err := apply.ReadRegistered(ctx, conn, name)
	if err != nil {
		return nil, err
	}
	all := make([]applierStatus, 0, len(regs))
	for _, r := range regs {
		a := applierStatus{Name: r.Name, Slot: r.Slot, Publications: r.Publications, Origin: originStatus{Name: r.Origin},
			SourceSystemID: r.SourceSystemID, SourceTimeline: r.SourceTimeline, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
			Copy: copyStatusOf(r.Copy), Tables: tableStatusesOf(r.Tables)} // status_progress.go, status_tables.go
		if r.UntilLSN != "" {
			a.Until = &untilStatus{LSN: r.UntilLSN, ReachedAt: r.UntilReachedAt}
		}
		all = append(all, a)
	}
	return all, nil
}

// readTargetState fills in the origin, the applier's sessions and its
// prepared transactions.
func readTargetState(ctx context.Context, conn *pgx.Conn, a *applierStatus) error {
	o := &a.Origin
	// pg_replication_origin_status is readable by superusers only unless
	// granted; walapply's own role reads the progress through the function
	// it runs with (docs/SECURITY.md), and the local LSN only when it may.
	var readStatus bool
	if err := conn.QueryRow(ctx, `SELECT pg_catalog.has_table_privilege('pg_catalog.pg_replication_origin_status', 'SELECT')`).Scan(&readStatus); err != nil {
		return fmt.Errorf("reading replication origin %q on the target: %w", o.Name, err)
	}
	local := `NULL::text`
	if readStatus {
		local = `(SELECT s.local_lsn::text FROM pg_catalog.pg_replication_origin_status s WHERE s.local_id = o.roident)`
	}
	var progress, localLSN *string
	err := conn.QueryRow(ctx, `SELECT pg_catalog.pg_replication_origin_progress(o.roname, false)::text, `+local+`
		FROM pg_catalog.pg_replication_origin o WHERE o.roname = $1`, o.Name).Scan(&progress, &localLSN)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return fmt.Errorf("reading replication origin %q on the target: %w", o.Name, err)
	default:
		o.Exists = true
		if progress != nil && *progress != protocol.InvalidLSN.String() {
			o.Progress = *progress
		}
		if localLSN != nil && *localLSN != protocol.InvalidLSN.String() {
			o.LocalLSN = *localLSN
		}
	}

	// run names its connections "walapply <name> apply" and "... control".
	prefix := "walapply " + a.Name + " "
	rows, err := conn.Query(ctx, `SELECT substr(application_name, length($1) + 1), pid, backend_start
		FROM pg_catalog.pg_stat_activity WHERE starts_with(application_name, $1) AND datname = current_database() ORDER BY 1, 2`, prefix)
	if err != nil {
		return fmt.Errorf("reading the applier's sessions on the target: %w", err)
	}
	a.Sessions, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (sessionStatus, error) {
		var s sessionStatus
		return s, r.Scan(&s.Role, &s.PID, &s.Since)
	})
	if err != nil {
		return fmt.Errorf("reading the applier's sessions on the target: %w", err)
	}

	rows, err = conn.Query(ctx, `SELECT gid, prepared, owner, database FROM pg_catalog.pg_prepared_xacts
		WHERE starts_with(gid, $1) ORDER BY prepared, gid`, twophase.GIDPrefix+a.Name+"_")
	if err != nil {
		return fmt.Errorf("reading prepared transactions on the target: %w", err)
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (preparedStatus, error) {
		var p preparedStatus
		return p, r.Scan(&p.GID, &p.Prepared, &p.Owner, &p.Database)
	})
	if err != nil {
		return fmt.Errorf("reading prepared transactions on the target: %w", err)
	}
	a.Prepared = []preparedStatus{}
	for _, p := range all {
		// The prefix of applier "a" also starts the GIDs of applier "a_b".
		if xid, ok := twophase.ParseTargetGID(a.Name, p.GID); ok {
			p.SourceXid = xid
			a.Prepared = append(a.Prepared, p)
		}
	}
	return readCopyProgress(ctx, conn, a) // status_progress.go
}

// untilStatus is the stop position of an applier's latest start with
// --until, and whether it got there.
type untilStatus struct {
	LSN       string     `json:"lsn"`
	ReachedAt *time.Time `json:"reached_at,omitempty"` // nil: not reached (still running, or stopped before)
}

// readSpillDir lists the spill files in dir.
func readSpillDir(dir string) (*spillStatus, error) {
	st := &spillStatus{Dir: dir, Files: []spillFile{}}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing spill directory %s: %w", dir, err)
	}
	st.Exists = true
	for _, e := range entries {
		xid, ok := state.SpillFileXid(e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if errors.Is(err, os.ErrNotExist) {
			continue // removed since the listing: its transaction ended
		}
		if err != nil {
			return nil, fmt.Errorf("reading spill file %s: %w", filepath.Join(dir, e.Name()), err)
		}
		st.Files = append(st.Files, spillFile{Name: e.Name(), Xid: xid, Bytes: info.Size(), Modified: info.ModTime()})
		st.Bytes += info.Size()
	}
	sort.Slice(st.Files, func(i, j int) bool { return st.Files[i].Xid < st.Files[j].Xid })
	return st, nil
}
