package apply

import (
	"bytes"
	"strconv"

	"github.com/walapply/walapply/protocol"
)

// maxCompactRows bounds the rows held for compaction before they are
// written out (and maxBatchBytes the bytes of their values). Every write-out
// costs one statement per table and kind of change whatever the number of
// rows, so the bound is high: on a 50-table backlog the target spent 2.78 s
// of CPU with 5,000 rows, 1.82 s with 20,000 (peak RSS 26.6 and 27.6 MiB).
const maxCompactRows = 20000

// netKind is the net change to one row within a group.
type netKind uint8

const (
	netInsert  netKind = iota + 1 // the row is new: insert its image
	netUpdate                     // the row existed: update it to its image
	netDelete                     // the row existed: delete it
	netReplace                    // the row existed and was deleted, then inserted anew
	netNothing                    // inserted and deleted again: no change
)

// cell is one column value held by the compactor; data lives in its arena.
type cell struct {
	kind     byte
	off, len int32
}

// netRow is the net change to the row with one key.
type netRow struct {
	kind  netKind
	image []cell // the new image, one cell per source column (insert, update, replace)
	key   []cell // the key that locates the existing row (update, delete, replace)
}

// netTable holds the pending net changes of one relation.
type netTable struct {
	e     *relEntry
	rows  map[string]*netRow
	order []string // keys in order of first change, for a stable statement order
}

// compactor holds the net changes of the open group.
//
// Net-effect compaction. Within a group of source transactions (group.go)
// the target only needs each row's final state: a row inserted and then
// updated three times is one insert of its last image, updated and then
// deleted is one delete, inserted and then deleted is nothing. The changes
// that remain are sent per table as multi-row statements (INSERT ... VALUES
// (...), (...); UPDATE ... FROM (VALUES ...); DELETE ... USING (VALUES
// ...)), so that a group costs a handful of statements instead of one per
// change. That is most of the work an external applier can save: the
// per-statement overhead on the target, not the round trips, is what makes
// it slower than PostgreSQL's own apply worker.
//
// When it is safe. Changes to different rows are independent only if
// nothing but the row's key can make them collide, so a table is compacted
// only when its replica identity is a key and the target table has no
// unique index or exclusion constraint other than that key (then applying a
// row's final image at any point in the group cannot violate a constraint
// that the source order would not). Foreign keys do not fire on the replica
// session (session_replication_role = replica), so the order between tables
// does not matter either. Other tables are applied statement by statement,
// in order. A change the net-effect rules do not cover (a key that changes,
// TRUNCATE, an update of a row deleted earlier in the group) first writes
// out everything pending, then is applied as it comes.
//
// What target-side triggers see. Only triggers enabled as ALWAYS or REPLICA
// fire on the replica session. With compaction they fire once per row with
// its net change, in per-table batches, not once per source change; run
// with NoCompaction (--no-compaction) if such triggers need every change.
type compactor struct {
	tables            []*netTable
	byRel             map[uint32]*netTable
	arena             []byte
	n                 int
	keyBuf, oldKeyBuf []byte
	intKeys           []intKeyRow // sortByIntKey's buffer
}

// newCompactor returns an empty compactor. Its arena starts non-nil: an
// empty value is an empty, non-nil slice of it, and nil means NULL to the
// statements built from it.
func newCompactor() *compactor {
	return &compactor{byRel: map[uint32]*netTable{}, arena: make([]byte, 0, 4096)}
}

func (c *compactor) hasRelation(relid uint32) bool {
	t := c.byRel[relid]
	return t != nil && len(t.rows) > 0
}

func (c *compactor) put(col *protocol.TupleColumn) cell {
	if col.Kind != protocol.ColumnText && col.Kind != protocol.ColumnBinary {
		return cell{kind: col.Kind}
	}
	off := len(c.arena)
	c.arena = append(c.arena, col.Data...)
	return cell{kind: col.Kind, off: int32(off), len: int32(len(col.Data))}
}

func (c *compactor) bytes(x cell) []byte {
	if x.kind != protocol.ColumnText && x.kind != protocol.ColumnBinary {
		return nil
	}
	return c.arena[x.off : x.off+x.len]
}

// rowKey renders the key columns of a tuple into dst, for use as a map
// key: looked up as t.rows[string(k)] it costs no allocation; only a new
// row's key is copied into a string.
func rowKey(dst []byte, e *relEntry, t *protocol.TupleData) []byte {
	b := dst[:0]
	for _, i := range e.key {
		col := &t.Columns[i]
		b = append(b, col.Kind)
		b = strconv.AppendInt(b, int64(len(col.Data)), 10)
		b = append(b, ':')
		b = append(b, col.Data...)
	}
	return b
}

func (c *compactor) keyCells(e *relEntry, t *protocol.TupleData) []cell {
	k := make([]cell, len(e.key))
	for n, i := range e.key {
		k[n] = c.put(&t.Columns[i])
	}
	return k
}

// image stores t's values in the arena; base, when given, is the row's
// image so far, which an unchanged TOAST value keeps, and whose cells are
// overwritten in place (each is read before it is written): merging an
// update into a row allocates nothing.
func (c *compactor) image(t *protocol.TupleData, base []cell) []cell {
	img := base
	if len(img) != len(t.Columns) {
		img = make([]cell, len(t.Columns))
	}
	for i := range t.Columns {
		col := &t.Columns[i]
		if col.Kind == protocol.ColumnUnchanged && base != nil && base[i].kind != protocol.ColumnUnchanged {
			img[i] = base[i] // an unchanged TOAST value keeps the image's value
			continue
		}
		img[i] = c.put(col)
	}
	return img
}

func (c *compactor) table(e *relEntry) *netTable {
	t := c.byRel[e.rel.RelationID]
	if t == nil || t.e != e {
		t = &netTable{e: e, rows: map[string]*netRow{}}
		c.byRel[e.rel.RelationID] = t
		c.tables = append(c.tables, t)
	}
	return t
}

// compactable reports whether a relation's changes may be compacted (see
// compactor).
func compactable(e *relEntry, p ConflictPolicies) bool {
	if e.compact == 0 {
		e.compact = 2
		if isCompactable(e, p) {
			e.compact = 1
		}
	}
	return e.compact == 1
}

func isCompactable(e *relEntry, p ConflictPolicies) bool {
	// Upserts and inserts of missing rows are done row by row.
	if p[ConflictInsertExists] != PolicyError || p[ConflictUpdateMissing] == PolicyApply {
		return false
	}
	if e.rel.ReplicaIdentity == protocol.ReplicaIdentityFull || len(e.key) == 0 || !e.target.KeyOnlyUnique {
		return false
	}
	// The target's one unique index must be the identity's key.
	if len(e.target.UniqueCols) != len(e.key) {
		return false
	}
	for _, i := range e.key {
		if !e.target.UniqueCols[e.rel.Columns[i].Name] {
			return false
		}
	}
	return true
}

// add records a change. It returns false when the change cannot be folded
// into the net state (the caller then writes out what is pending and applies
// the change as it comes).
func (c *compactor) add(e *relEntry, msg protocol.Message) bool {
	switch m := msg.(type) {
	case *protocol.Insert:
		if checkWidth(e, &m.New, opInsert, "") != nil {
			return false
		}
		t := c.table(e)
		c.keyBuf = rowKey(c.keyBuf, e, &m.New)
		r := t.rows[string(c.keyBuf)]
		switch {
		case r == nil:
			k := string(c.keyBuf)
			t.rows[k] = &netRow{kind: netInsert, image: c.image(&m.New, nil)}
			t.order = append(t.order, k)
		case r.kind == netDelete:
			r.kind, r.image = netReplace, c.image(&m.New, nil)
		case r.kind == netNothing:
			r.kind, r.image = netInsert, c.image(&m.New, nil)
		default:
			return false // a duplicate key: let the target say so, in order
		}
	case *protocol.Update:
		if checkWidth(e, &m.New, opUpdate, "new") != nil || (m.OldKind != 0 && checkWidth(e, &m.Old, opUpdate, "old") != nil) {
			return false
		}
		c.keyBuf = rowKey(c.keyBuf, e, &m.New)
		if m.OldKind != 0 {
			c.oldKeyBuf = rowKey(c.oldKeyBuf, e, &m.Old)
			if !bytes.Equal(c.oldKeyBuf, c.keyBuf) {
				return false // the key changes
			}
		}
		t := c.table(e)
		r := t.rows[string(c.keyBuf)]
		switch {
		case r == nil:
			k := string(c.keyBuf)
			t.rows[k] = &netRow{kind: netUpdate, image: c.image(&m.New, nil), key: c.keyCells(e, &m.New)}
			t.order = append(t.order, k)
		case r.kind == netInsert || r.kind == netUpdate || r.kind == netReplace:
			r.image = c.image(&m.New, r.image)
		default:
			return false // updating a row deleted in this group
		}
	case *protocol.Delete:
		if checkWidth(e, &m.Old, opDelete, "old") != nil {
			return false
		}
		t := c.table(e)
		c.keyBuf = rowKey(c.keyBuf, e, &m.Old)
		r := t.rows[string(c.keyBuf)]
		switch {
		case r == nil:
			k := string(c.keyBuf)
			t.rows[k] = &netRow{kind: netDelete, key: c.keyCells(e, &m.Old)}
			t.order = append(t.order, k)
		case r.kind == netInsert:
			r.kind, r.image = netNothing, nil
		case r.kind == netUpdate || r.kind == netReplace:
			if r.key == nil {
				r.key = c.keyCells(e, &m.Old)
			}
			r.kind, r.image = netDelete, nil
		default:
			return false
		}
	default:
		return false
	}
	c.n++
	return true
}
