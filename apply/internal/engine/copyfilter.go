package engine

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/protocol"
)

// CopySnapshot is an MVCC snapshot in pg_snapshot's terms: xids below xmin
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
// below xmin is finished, whatever xmax says; Visible does the same.
type CopySnapshot struct {
	xmin, xmax uint64
	xip        []uint64 // sorted
}

// ParseSnapshot reads pg_snapshot's text form, "xmin:xmax:xip,xip,...".
// It accepts every snapshot PostgreSQL hands out, xmax below xmin
// included, and refuses an xip outside [xmin, xmax), which none has (and
// which, with xmax below xmin, means any xip at all).
func ParseSnapshot(s string) (CopySnapshot, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return CopySnapshot{}, fmt.Errorf("apply: snapshot %q: want xmin:xmax:xip-list", s)
	}
	var snap CopySnapshot
	var err error
	if snap.xmin, err = strconv.ParseUint(parts[0], 10, 64); err != nil {
		return CopySnapshot{}, fmt.Errorf("apply: snapshot %q: xmin: %w", s, err)
	}
	if snap.xmax, err = strconv.ParseUint(parts[1], 10, 64); err != nil {
		return CopySnapshot{}, fmt.Errorf("apply: snapshot %q: xmax: %w", s, err)
	}
	if parts[2] != "" {
		for _, f := range strings.Split(parts[2], ",") {
			x, err := strconv.ParseUint(f, 10, 64)
			if err != nil {
				return CopySnapshot{}, fmt.Errorf("apply: snapshot %q: xip: %w", s, err)
			}
			if x < snap.xmin || x >= snap.xmax {
				return CopySnapshot{}, fmt.Errorf("apply: snapshot %q: xip %d outside [xmin, xmax)", s, x)
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

// Visible reports whether the transaction xid (which committed or
// prepared) had committed in the snapshot. xmin is asked first, as
// PostgreSQL does: the order decides when xmax is below xmin.
func (s *CopySnapshot) Visible(xid uint32) bool {
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

// CopiedTable is a table copied in a snapshot later than the stream's
// start: Snap, exported at LSN.
type CopiedTable struct {
	LSN  protocol.LSN
	Snap CopySnapshot
}

// Holds reports whether the copy holds the changes of the source
// transaction xid whose commit (or prepare) LSN is final (see CopyFilter).
func (t *CopiedTable) Holds(xid uint32, final protocol.LSN) bool {
	return final < t.LSN && t.Snap.Visible(xid)
}

// CopyFilter decides which changes the tables' copies already hold. A nil
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
type CopyFilter struct {
	tables map[sqlgen.Rel]*CopiedTable
	// until is the highest copy LSN: a transaction whose commit or
	// prepare LSN is at or above it is never filtered.
	until protocol.LSN
}

// NewCopyFilter returns a filter that holds nothing yet.
func NewCopyFilter() *CopyFilter {
	return &CopyFilter{tables: map[sqlgen.Rel]*CopiedTable{}}
}

// Add records that table name was copied as t.
func (f *CopyFilter) Add(name sqlgen.Rel, t *CopiedTable) {
	f.tables[name] = t
	f.until = max(f.until, t.LSN)
}

// Len is the number of tables the filter knows (0 for nil).
func (f *CopyFilter) Len() int {
	if f == nil {
		return 0
	}
	return len(f.tables)
}

// Until is the highest copy LSN (0 for nil): a transaction whose commit or
// prepare LSN is at or above it is never filtered.
func (f *CopyFilter) Until() protocol.LSN {
	if f == nil {
		return 0
	}
	return f.until
}

// Filter returns msg, or nil when the copy of its table already holds it,
// or (for a TRUNCATE of several tables) a TRUNCATE of the tables whose
// copies do not. It runs for the change messages of the open source
// transaction (xid, its commit or prepare LSN final) before they are
// applied; rels names their relations.
func (f *CopyFilter) Filter(rels *relmap.Cache, xid uint32, final protocol.LSN, msg protocol.Message) protocol.Message {
	if f == nil || final >= f.until {
		return msg
	}
	if relid, ok := protocol.RowRelation(msg); ok {
		if f.holds(rels, xid, final, relid) {
			return nil
		}
		return msg
	}
	m, ok := msg.(*protocol.Truncate)
	if !ok {
		return msg
	}
	keep := make([]uint32, 0, len(m.RelationIDs))
	for _, id := range m.RelationIDs {
		if !f.holds(rels, xid, final, id) {
			keep = append(keep, id)
		}
	}
	if len(keep) == len(m.RelationIDs) {
		return msg
	}
	if len(keep) == 0 {
		return nil
	}
	cp := *m
	cp.RelationIDs = keep
	return &cp
}

// holds reports whether the copy of relation relid holds the changes of
// the transaction xid ending at final.
func (f *CopyFilter) holds(rels *relmap.Cache, xid uint32, final protocol.LSN, relid uint32) bool {
	e := rels.Rels[relid]
	if e == nil {
		return false // the applier reports the missing Relation message
	}
	t := f.tables[sqlgen.Rel{Schema: relmap.SourceSchema(e.Rel.Namespace), Name: e.Rel.Name}]
	return t != nil && t.Holds(xid, final)
}
