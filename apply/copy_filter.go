package apply

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/protocol"
)

// copySnapshot is an MVCC snapshot in pg_snapshot's terms: xids below xmin
// are finished, xids from xmax on had not started, and those in between
// are in progress exactly when listed in xip. A copy only ever asks about
// transactions that committed or prepared, so "not in progress" means
// "committed and visible".
//
// xmax may be below xmin. A slot's exported snapshot (snapbuild.c) takes
// xmin from the oldest running xid of the last xl_running_xacts record it
// read and xmax from one past the newest commit it saw while building, so
// when the transactions between the two aborted, xmax is the lower one
// (seen as "2863:2862:"); the list of running xids, every xid from xmin
// up to xmax that did not commit, is then empty. PostgreSQL reads such a
// snapshot with xmin first (XidInMVCCSnapshot, pg_visible_in_snapshot):
// below xmin is finished, whatever xmax says; visible does the same.
type copySnapshot struct {
	xmin, xmax uint64
	xip        []uint64 // sorted
}

// parseSnapshot reads pg_snapshot's text form, "xmin:xmax:xip,xip,...".
// It accepts every snapshot PostgreSQL hands out, xmax below xmin
// included, and refuses an xip outside [xmin, xmax), which none has (and
// which, with xmax below xmin, means any xip at all).
func parseSnapshot(s string) (copySnapshot, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return copySnapshot{}, fmt.Errorf("apply: snapshot %q: want xmin:xmax:xip-list", s)
	}
	var snap copySnapshot
	var err error
	if snap.xmin, err = strconv.ParseUint(parts[0], 10, 64); err != nil {
		return copySnapshot{}, fmt.Errorf("apply: snapshot %q: xmin: %w", s, err)
	}
	if snap.xmax, err = strconv.ParseUint(parts[1], 10, 64); err != nil {
		return copySnapshot{}, fmt.Errorf("apply: snapshot %q: xmax: %w", s, err)
	}
	if parts[2] != "" {
		for _, f := range strings.Split(parts[2], ",") {
			x, err := strconv.ParseUint(f, 10, 64)
			if err != nil {
				return copySnapshot{}, fmt.Errorf("apply: snapshot %q: xip: %w", s, err)
			}
			if x < snap.xmin || x >= snap.xmax {
				return copySnapshot{}, fmt.Errorf("apply: snapshot %q: xip %d outside [xmin, xmax)", s, x)
			}
			snap.xip = append(snap.xip, x)
		}
	}
	slices.Sort(snap.xip)
	return snap, nil
}

// widenXid turns a 32-bit xid, as pgoutput sends it, into the 64-bit xid
// nearest to ref (a full xid of the same era): the epoch is the one that
// puts it within 2^31 of ref, which is where PostgreSQL's wraparound rules
// keep every live xid.
func widenXid(xid uint32, ref uint64) uint64 {
	d := int64(int32(xid - uint32(ref)))
	if d < 0 && uint64(-d) > ref {
		return uint64(xid) // before the first epoch's end: no earlier epoch exists
	}
	return uint64(int64(ref) + d)
}

// visible reports whether the transaction xid (which committed or
// prepared) had committed in the snapshot. xmin is asked first, as
// PostgreSQL does: the order decides when xmax is below xmin.
func (s *copySnapshot) visible(xid uint32) bool {
	x := widenXid(xid, s.xmax)
	switch {
	case x < s.xmin:
		return true
	case x >= s.xmax:
		return false
	}
	_, inProgress := slices.BinarySearch(s.xip, x)
	return !inProgress
}

// copiedTable is a table copied in a snapshot later than the stream's
// start.
type copiedTable struct {
	lsn  protocol.LSN
	snap copySnapshot
}

// copyFilter decides which changes the tables' copies already hold. A nil
// filter holds nothing: every change applies.
//
// Changes a table's initial copy already holds.
//
// A copy that runs in one go reads every table in the snapshot the slot
// exported at its consistent point P1, and streaming starts at P1: the
// stream carries exactly the transactions the snapshot does not hold, so
// nothing needs filtering. A copy that was interrupted cannot use that
// snapshot again (it lives only as long as the connection that created the
// slot), so the tables that had not finished are copied in a new snapshot,
// exported by a temporary slot at a later point P2, while the tables that
// had finished stay as they are and streaming still starts at P1. A source
// transaction between P1 and P2 is then in the stream and, for the tables
// copied at P2, possibly in the copy as well: its changes to those tables
// must be skipped exactly when the copy holds them. PostgreSQL's tablesync
// solves the same problem with a per-table LSN (SUBREL_STATE_SYNCDONE).
//
// The rule here: a change to a table copied in snapshot S at point L is
// skipped when its transaction's commit (or prepare) LSN is below L and its
// xid is visible in S. For an ordinary or streamed transaction the first
// test alone decides (a transaction that committed before L is in the
// snapshot); a prepared transaction (two-phase) is decoded at PREPARE, and
// one prepared before L may have committed before L or after it, which
// only the snapshot tells. The LSN test also bounds the xid comparison to
// transactions near the snapshot in time, so xid wraparound cannot confuse
// it.
type copyFilter struct {
	tables map[sqlgen.Rel]*copiedTable
	// until is the highest copy LSN: a transaction whose commit or
	// prepare LSN is at or above it is never filtered.
	until   protocol.LSN
	skipped int64 // changes skipped, for the log
}

// filter returns msg, or nil when the copy of its table already holds it,
// or (for a TRUNCATE of several tables) a TRUNCATE of the tables whose
// copies do not. It runs for the change messages of the open source
// transaction, a.txn, before they are applied.
func (f *copyFilter) filter(a *applier, msg protocol.Message) protocol.Message {
	if f == nil || a.txn.finalLSN >= f.until {
		return msg
	}
	var relid uint32
	switch m := msg.(type) {
	case *protocol.Insert:
		relid = m.RelationID
	case *protocol.Update:
		relid = m.RelationID
	case *protocol.Delete:
		relid = m.RelationID
	case *protocol.Truncate:
		keep := make([]uint32, 0, len(m.RelationIDs))
		for _, id := range m.RelationIDs {
			if !f.holds(a, id) {
				keep = append(keep, id)
			}
		}
		if len(keep) == len(m.RelationIDs) {
			return msg
		}
		f.skipped++
		if len(keep) == 0 {
			return nil
		}
		cp := *m
		cp.RelationIDs = keep
		return &cp
	default:
		return msg
	}
	if f.holds(a, relid) {
		f.skipped++
		return nil
	}
	return msg
}

// holds reports whether the copy of relation relid holds the changes of
// the open transaction.
func (f *copyFilter) holds(a *applier, relid uint32) bool {
	e := a.rels.Rels[relid]
	if e == nil {
		return false // the applier reports the missing Relation message
	}
	t := f.tables[sqlgen.Rel{Schema: relmap.SourceSchema(e.Rel.Namespace), Name: e.Rel.Name}]
	return t != nil && a.txn.finalLSN < t.lsn && t.snap.visible(a.txn.xid)
}

// loadCopyFilter reads the tables an initial copy of applier copied in a
// snapshot later than from, the position streaming starts at. It returns
// nil when there are none (always, unless a copy was resumed).
func loadCopyFilter(ctx context.Context, q relmap.Querier, applier string, from protocol.LSN) (*copyFilter, error) {
	rows, err := q.Query(ctx, `SELECT schema_name, table_name, copy_lsn::text, snapshot FROM walapply.copy_state
		WHERE applier = $1 AND status = 'done' AND copy_lsn > $2::pg_catalog.pg_lsn`, applier, from.String())
	if err != nil {
		return nil, fmt.Errorf("reading walapply.copy_state on the target: %w", err)
	}
	defer rows.Close()
	f := &copyFilter{tables: map[sqlgen.Rel]*copiedTable{}}
	for rows.Next() {
		var n sqlgen.Rel
		var lsn, snap string
		if err := rows.Scan(&n.Schema, &n.Name, &lsn, &snap); err != nil {
			return nil, fmt.Errorf("reading walapply.copy_state on the target: %w", err)
		}
		t := &copiedTable{}
		if t.lsn, err = protocol.ParseLSN(lsn); err != nil {
			return nil, fmt.Errorf("walapply.copy_state, table %s: %w", sqlgen.QuoteQualified(n.Schema, n.Name), err)
		}
		if t.snap, err = parseSnapshot(snap); err != nil {
			return nil, fmt.Errorf("walapply.copy_state, table %s: %w", sqlgen.QuoteQualified(n.Schema, n.Name), err)
		}
		f.tables[n] = t
		f.until = max(f.until, t.lsn)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading walapply.copy_state on the target: %w", err)
	}
	if len(f.tables) == 0 {
		return nil, nil
	}
	return f, nil
}
