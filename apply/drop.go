package apply

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/internal/secret"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/state"
	"github.com/walapply/walapply/twophase"
)

// DropConfig says which applier Drop drops.
type DropConfig struct {
	Target string
	Name   string
	// Source, if set, is where the applier's slot is dropped; without it
	// (or with KeepSlot) the slot is left.
	Source   string
	KeepSlot bool
	// SpillDir is the applier's spill directory (default: run's default
	// for Name).
	SpillDir string
}

// DropReport says what Drop found and dropped, and what it left.
type DropReport struct {
	Name string
	// Found is false when nothing of the applier was there; Others then
	// names the appliers recorded on the target.
	Found  bool
	Others []string
	Slot   DroppedSlot
	// Origins are the replication origins dropped on the target.
	Origins []string
	// RolledBack are the GIDs of the applier's prepared transactions that
	// were rolled back. Unattributed are prepared transactions in the
	// target database whose GIDs are no applier's: left alone.
	RolledBack   []string
	Unattributed []twophase.Prepared
	// Rows counts the rows deleted from the walapply schema, per table.
	Rows []TableRows
	// SpillDir is the spill directory looked at; SpillFiles the files
	// removed from it, SpillLeft those left (not the applier's for this
	// target, or whose owner is unknown: see state.RemoveSpillFiles),
	// SpillDirRemoved whether the directory went too.
	SpillDir        string
	SpillFiles      []string
	SpillLeft       []string
	SpillDirRemoved bool

	spillTarget string // the target's identity in spill directories
}

// DroppedSlot is what became of the applier's slot.
type DroppedSlot struct {
	Name    string // "" when no slot is recorded for the applier
	Dropped bool
	Missing bool // it did not exist on the source
	// Left says why the slot was left on the source ("" when dropped or
	// missing).
	Left string
}

// TableRows is the number of rows deleted from a table.
type TableRows struct {
	Table string
	Rows  int64
}

// slotActiveWait bounds how long Drop waits for an active slot to be
// released: the walsender of an applier that just stopped exits a moment
// after it.
const slotActiveWait = 2 * time.Second

// Drop drops the applier dc.Name; see below. On an error, the
// report says what had been dropped before it.
//
// Dropping an applier (walapply drop), like DROP SUBSCRIPTION: what
// walapply created for the applier goes, on both sides (DESIGN.md
// invariant 10): its slot on the source, its replication origins on the
// target (the applier's and its copy workers'), its prepared transactions
// there, its rows in the walapply schema and its spill files.
//
// Drop first takes the applier's running-applier lock (lease.go): it
// refuses while the applier runs, naming the process, and no start can
// begin while it drops. It then looks at everything before it drops
// anything, and drops nothing when the source is another cluster than the
// applier's or the slot is in use there. The slot goes first: should the
// target's part fail after it, a second drop finds the rest, whereas the
// other order could forget the name of a slot that holds WAL. The
// prepared transactions are rolled back next, since their COMMIT PREPARED
// would have come through the slot; then the origins, the rows (in one
// transaction) and the spill files.
//
// It touches nothing it cannot attribute to the applier: prepared
// transactions under other GIDs (with --gid-mode source the applier's own
// carry the source's GIDs and cannot be told from the target's: they are
// listed, not rolled back), spill files whose header names another applier
// or cannot be read, and the slot when the source is unreachable or not
// given (the report says how to drop it).
//
// Dropping an applier of which nothing is left succeeds, like DROP
// SUBSCRIPTION IF EXISTS: a second drop reports that it found nothing, and
// the appliers the target does have, so that a mistyped name shows.
func Drop(ctx context.Context, dc DropConfig) (*DropReport, error) {
	origin, err := state.OriginName(dc.Name)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if dc.Source != "" && !dc.KeepSlot {
		if _, err := pgconn.ParseConfig(dc.Source); err != nil {
			return nil, fmt.Errorf("%w: source connection string: %v", ErrConfig, secret.Error(err, dc.Source))
		}
	}
	conn, err := connectTarget(ctx, &Config{Target: dc.Target, Name: dc.Name}, "drop")
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rep := &DropReport{Name: dc.Name, SpillDir: dc.SpillDir}
	if rep.spillTarget, err = targetIdentity(ctx, conn); err != nil { // identity.go
		return nil, err
	}
	if rep.SpillDir == "" {
		if rep.SpillDir, err = defaultSpillDir(dc.Name, rep.spillTarget); err != nil {
			return nil, err
		}
	}
	for attempt := 0; ; attempt++ {
		ok, err := tryLease(ctx, conn, dc.Name)
		if err != nil {
			return nil, err
		}
		if ok {
			break
		}
		holder, err := leaseHolder(ctx, conn, dc.Name)
		if err != nil {
			return nil, err
		}
		if holder.Backend != 0 || attempt > 0 { // else it let go meanwhile: once more
			return nil, &PermanentError{Err: holder}
		}
	}
	defer releaseLease(context.WithoutCancel(ctx), conn, dc.Name)

	f, err := readDropFacts(ctx, conn, dc.Name, origin)
	if err != nil {
		return nil, err
	}
	rep.Slot.Name, rep.Others = f.slot, f.others
	rc, err := dropSourceCheck(ctx, dc, f, &rep.Slot)
	if err != nil {
		return rep, err
	}
	if rc != nil {
		defer rc.Close(context.WithoutCancel(ctx))
		if err := rc.DropSlot(ctx, f.slot, false); err != nil {
			return rep, fmt.Errorf("dropping replication slot %q on the source: %w", f.slot, err)
		}
		rep.Slot.Dropped = true
	}
	if err := f.dropTarget(ctx, conn, rep); err != nil {
		return rep, err
	}
	if err := dropSpill(rep, dc.SpillDir == ""); err != nil {
		return rep, err
	}
	rep.Found = f.found() || len(rep.SpillFiles) > 0 || rep.Slot.Dropped
	return rep, nil
}

// dropSourceCheck decides what happens to the slot and returns the
// replication connection to drop it on, or nil when it stays (slot.Left
// says why) or is missing. It fails, before anything is dropped, when the
// source is not the applier's or the slot is in use.
func dropSourceCheck(ctx context.Context, dc DropConfig, f *dropFacts, slot *DroppedSlot) (*protocol.ReplConn, error) {
	switch {
	case f.slot == "":
		return nil, nil
	case dc.KeepSlot:
		slot.Left = "--keep-slot"
		return nil, nil
	case dc.Source == "":
		slot.Left = "no --source given"
		return nil, nil
	}
	rc, err := protocol.ConnectReplication(ctx, dc.Source)
	if err != nil {
		slot.Left = "the source could not be reached: " + strings.Join(strings.Fields(err.Error()), " ")
		return nil, nil
	}
	keep := false
	defer func() {
		if !keep {
			rc.Close(context.WithoutCancel(ctx))
		}
	}()
	sys, err := rc.IdentifySystem(ctx)
	if err != nil {
		return nil, fmt.Errorf("identifying the source system: %w", err)
	}
	if f.systemID != "" && sys.SystemID != f.systemID {
		return nil, &PermanentError{Err: fmt.Errorf("%w: applier %q replicates from the cluster with system identifier %s, but the source given is %s: "+
			"nothing was dropped; give the applier's source, or --keep-slot to leave its slot", ErrWrongSource, dc.Name, f.systemID, sys.SystemID)}
	}
	deadline := time.Now().Add(slotActiveWait)
	for {
		st, found, err := rc.Slot(ctx, f.slot)
		if err != nil {
			return nil, fmt.Errorf("looking up replication slot %q on the source: %w", f.slot, err)
		}
		if !found {
			slot.Missing = true
			return nil, nil
		}
		if !st.Active {
			keep = true
			return rc, nil
		}
		if time.Now().After(deadline) {
			return nil, &PermanentError{Err: fmt.Errorf("replication slot %q of applier %q is in use on the source by process %d (pg_replication_slots.active_pid), "+
				"while no walapply runs applier %q against this target: stop whatever streams from it, then drop again (or drop with --keep-slot and drop the slot later); nothing was dropped",
				f.slot, dc.Name, st.ActivePID, dc.Name)}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// dropTarget rolls back the applier's prepared transactions, drops its
// origins and deletes its rows.
func (f *dropFacts) dropTarget(ctx context.Context, conn *pgx.Conn, rep *DropReport) error {
	rep.Unattributed = f.unattributed
	for _, gid := range f.prepared {
		if _, err := conn.Exec(ctx, twophase.FinishSQL(gid, false)); err != nil && !isUndefinedObject(err) {
			return fmt.Errorf("rolling back prepared transaction %q on the target: %w", gid, err)
		}
		rep.RolledBack = append(rep.RolledBack, gid)
	}
	for _, o := range f.origins {
		if err := state.DropOrigin(ctx, conn, o); err != nil {
			return err
		}
		rep.Origins = append(rep.Origins, o)
	}
	if len(f.rows) == 0 {
		return nil
	}
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		// walapply.appliers first: the tables that reference it cascade.
		for _, t := range f.rows {
			col := "applier"
			if t.Table == "walapply.appliers" {
				col = "name"
			}
			table := sqlgen.QuoteQualified("walapply", strings.TrimPrefix(t.Table, "walapply."))
			if _, err := tx.Exec(ctx, "DELETE FROM "+table+" WHERE "+sqlgen.QuoteIdent(col)+" = $1", f.name); err != nil {
				return fmt.Errorf("%s: %w", t.Table, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("deleting applier %q's rows in the walapply schema on the target: %w", f.name, err)
	}
	rep.Rows = f.rows
	return nil
}

// dropSpill removes the applier's spill files, and the directory when it
// is left empty; with the default directory, also the empty directories
// above it that name the applier and the target.
func dropSpill(rep *DropReport, isDefault bool) error {
	var err error
	rep.SpillFiles, rep.SpillLeft, err = state.RemoveSpillFiles(state.OSFS, rep.SpillDir, rep.Name, rep.spillTarget)
	if err != nil {
		return err
	}
	if len(rep.SpillLeft) > 0 {
		return nil
	}
	// os.Remove removes only an empty directory; one that holds other
	// files, or is a mount point, stays.
	if os.Remove(rep.SpillDir) == nil {
		rep.SpillDirRemoved = true
		if isDefault {
			// defaultSpillDir's <name>/<target> directories above it.
			parent := filepath.Dir(rep.SpillDir)
			if os.Remove(parent) == nil {
				_ = os.Remove(filepath.Dir(parent))
			}
		}
	}
	return nil
}
