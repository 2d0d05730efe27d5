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
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/internal/secret"
	"github.com/walapply/walapply/protocol"
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

// readAppliers reads walapply.appliers: every applier, or the named one.
func readAppliers(ctx context.Context, conn *pgx.Conn, name string) ([]applierStatus, error) {
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT pg_catalog.to_regclass('walapply.appliers') IS NOT NULL").Scan(&exists); err != nil {
		return nil, fmt.Errorf("looking for walapply.appliers on the target: %w", err)
	}
	if !exists {
		return nil, errors.New("no walapply applier has run against this target: it has no walapply.appliers table (walapply run creates it)")
	}
	rows, err := conn.Query(ctx, `SELECT name, slot_name, publications, origin_name, source_system_id, source_timeline, created_at, updated_at
		FROM walapply.appliers ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("reading walapply.appliers on the target: %w", err)
	}
	var all []applierStatus
	for rows.Next() {
		var a applierStatus
		if err := rows.Scan(&a.Name, &a.Slot, &a.Publications, &a.Origin.Name, &a.SourceSystemID, &a.SourceTimeline, &a.CreatedAt, &a.UpdatedAt); err != nil {
			rows.Close()
			return nil, fmt.Errorf("reading walapply.appliers on the target: %w", err)
		}
		all = append(all, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading walapply.appliers on the target: %w", err)
	}
	if name == "" {
		if all == nil {
			all = []applierStatus{}
		}
		return all, nil
	}
	names := make([]string, 0, len(all))
	for _, a := range all {
		if a.Name == name {
			return []applierStatus{a}, nil
		}
		names = append(names, strconv.Quote(a.Name))
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no applier %q on the target: walapply.appliers is empty", name)
	}
	return nil, fmt.Errorf("no applier %q on the target; it has %s", name, strings.Join(names, ", "))
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
	if err := readUntilState(ctx, conn, a); err != nil {
		return err
	}
	if err := readCopyState(ctx, conn, a); err != nil {
		return err
	}
	if err := readTableStates(ctx, conn, a); err != nil {
		return err
	}
	return readCopyProgress(ctx, conn, a) // status_progress.go
}

// untilStatus is the stop position of an applier's latest start with
// --until, and whether it got there.
type untilStatus struct {
	LSN       string     `json:"lsn"`
	ReachedAt *time.Time `json:"reached_at,omitempty"` // nil: not reached (still running, or stopped before)
}

// readUntilState reads walapply.appliers' until columns (migration 8; a
// target migrated by an older walapply has none).
func readUntilState(ctx context.Context, conn *pgx.Conn, a *applierStatus) error {
	var lsn *string
	var at *time.Time
	err := conn.QueryRow(ctx, `SELECT to_jsonb(a)->>'until_lsn', (to_jsonb(a)->>'until_reached_at')::timestamptz
		FROM walapply.appliers a WHERE name = $1`, a.Name).Scan(&lsn, &at)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("reading applier %q's --until position on the target: %w", a.Name, err)
	}
	if lsn != nil {
		a.Until = &untilStatus{LSN: *lsn, ReachedAt: at}
	}
	return nil
}

// readSourceState reads the applier's slot on the source.
func readSourceState(ctx context.Context, conn *pgx.Conn, a *applierStatus) (*sourceStatus, error) {
	s := &sourceStatus{}
	// pg_control_system() may be denied to a role without pg_monitor; the
	// rest does not depend on it.
	var sysID string
	if err := conn.QueryRow(ctx, "SELECT system_identifier::text FROM pg_catalog.pg_control_system()").Scan(&sysID); err == nil {
		s.SystemID = sysID
		match := sysID == a.SourceSystemID
		s.SystemIDMatches = &match
	}
	var slotType *string
	var active *bool // NULL when the slot does not exist
	slot := &slotStatus{}
	var lag, retained *int64
	var lagSecs *float64
	var hidden *bool // pg_stat_replication's row is there, its columns hidden from this role
	var restart, confirmed, walStatus, plugin, database *string
	err := conn.QueryRow(ctx, `SELECT pg_catalog.pg_current_wal_lsn()::text, s.slot_type, s.plugin, s.database, s.active, s.active_pid,
			s.restart_lsn::text, s.confirmed_flush_lsn::text, s.wal_status,
			pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), s.confirmed_flush_lsn)::bigint,
			pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), s.restart_lsn)::bigint,
			EXTRACT(epoch FROM r.flush_lag)::float8, r.reply_time, r.pid IS NOT NULL AND r.state IS NULL
		FROM (SELECT 1) one
		LEFT JOIN pg_catalog.pg_replication_slots s ON s.slot_name = $1
		LEFT JOIN pg_catalog.pg_stat_replication r ON r.pid = s.active_pid`, a.Slot).
		Scan(&s.CurrentLSN, &slotType, &plugin, &database, &active, &slot.ActivePID, &restart, &confirmed, &walStatus,
			&lag, &retained, &lagSecs, &slot.ReplyTime, &hidden)
	if err != nil {
		return nil, fmt.Errorf("reading replication slot %q on the source: %w", a.Slot, err)
	}
	if slotType == nil {
		s.SlotMissing = true
		return s, nil
	}
	slot.Active = *active
	slot.Plugin, slot.Database = deref(plugin), deref(database)
	slot.RestartLSN, slot.ConfirmedFlushLSN, slot.WALStatus = deref(restart), deref(confirmed), deref(walStatus)
	slot.LagBytes, slot.RetainedBytes = lag, retained
	if lag != nil && *lag < 0 {
		// Not expected (a client confirms only what it received), but a
		// negative lag would only confuse.
		zero := int64(0)
		slot.LagBytes = &zero
	}
	switch {
	case slot.LagBytes != nil && *slot.LagBytes == 0:
		zero := 0.0
		slot.LagSeconds = &zero
	case lagSecs != nil:
		slot.LagSeconds, slot.LagFrom = lagSecs, lagFromView
	}
	if err := readSlotFailover(ctx, conn, a.Slot, slot); err != nil { // status_failover.go
		return nil, err
	}
	s.Slot = slot
	if slot.LagSeconds == nil && slot.Active {
		return s, measureLag(ctx, conn, a.Slot, s, hidden != nil && *hidden) // status_lag.go
	}
	return s, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
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
		xid, ok := spillXid(e.Name())
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

// spillXid reads the xid from a spill file name, xid-<xid>.spill (the
// naming of package state).
func spillXid(name string) (uint32, bool) {
	digits, ok := strings.CutPrefix(name, "xid-")
	if !ok {
		return 0, false
	}
	if digits, ok = strings.CutSuffix(digits, ".spill"); !ok {
		return 0, false
	}
	v, err := strconv.ParseUint(digits, 10, 32)
	return uint32(v), err == nil
}
