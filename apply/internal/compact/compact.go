// Package compact holds a group's changes as their net effect per row
// (Compactor: the rules and when they are safe) and turns runs of net rows
// into the row sources of multi-row statements: VALUES lists, or one typed
// array parameter per column (rows.go), cut into chunks of few sizes so
// that each table needs few prepared statements; rows to update or delete
// are sorted by key first (order.go), so that the target's index lookups
// stay on neighbouring pages. The SQL of the multi-row INSERT, UPDATE and
// DELETE, with the missing-row search of the last two, is statements.go's;
// the applier writes the net state out with them (apply's compact_write.go).
package compact

import (
	"bytes"
	"strconv"

	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/protocol"
)

// MaxRows bounds the rows held for compaction before they are
// written out (and pipeline.MaxBatchBytes the bytes of their values). Every write-out
// costs one statement per table and kind of change whatever the number of
// rows, so the bound is high: on a 50-table backlog the target spent 2.78 s
// of CPU with 5,000 rows, 1.82 s with 20,000 (peak RSS 26.6 and 27.6 MiB).
const MaxRows = 20000

// Kind is the net change to one row within a group.
type Kind uint8

const (
	NetInsert  Kind = iota + 1 // the row is new: insert its image
	NetUpdate                  // the row existed: update it to its image
	NetDelete                  // the row existed: delete it
	NetReplace                 // the row existed and was deleted, then inserted anew
	NetNothing                 // inserted and deleted again: no change
)

// Cell is one column value held by the compactor; data lives in its arena.
type Cell struct {
	Kind     byte
	Off, Len int32
}

// Row is the net change to the row with one key.
type Row struct {
	Kind  Kind
	Image []Cell // the new image, one cell per source column (insert, update, replace)
	Key   []Cell // the key that locates the existing row (update, delete, replace)
}

// Table holds the pending net changes of one relation.
type Table struct {
	E     *relmap.Entry
	Rows  map[string]*Row
	Order []string // keys in order of first change, for a stable statement order
	used  bool     // in Tables: it has changes in the open write-out
}

// Compactor holds the net changes of the open group.
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
type Compactor struct {
	Tables            []*Table
	ByRel             map[uint32]*Table
	Arena             []byte
	N                 int
	keyBuf, oldKeyBuf []byte
	intKeys           []intKeyRow // sortByIntKey's buffer
	slab              slab        // the rows and cells of the open write-out
}

// New returns an empty compactor. Its arena starts non-nil: an
// empty value is an empty, non-nil slice of it, and nil means NULL to the
// statements built from it.
func New() *Compactor {
	return &Compactor{ByRel: map[uint32]*Table{}, Arena: make([]byte, 0, 4096)}
}

// Reset empties the compactor after a write-out. The tables that had
// changes keep their maps (cleared: a map grown to a write-out's rows is
// not grown again from empty by the next one, which cost walapply a tenth
// of its CPU on pgbench) and the rows' and cells' storage is reused; tables
// without changes in the write-out are dropped, so what is kept is bounded
// by one write-out's rows.
func (c *Compactor) Reset() {
	for id, t := range c.ByRel {
		if !t.used {
			delete(c.ByRel, id)
		}
	}
	for _, t := range c.Tables {
		clear(t.Rows)
		clear(t.Order)
		t.Order, t.used = t.Order[:0], false
	}
	clear(c.Tables)
	c.Tables, c.Arena, c.N = c.Tables[:0], c.Arena[:0], 0
	c.slab.reset()
}

func (c *Compactor) HasRelation(relid uint32) bool {
	t := c.ByRel[relid]
	return t != nil && len(t.Rows) > 0
}

func (c *Compactor) Put(col *protocol.TupleColumn) Cell {
	if col.Kind != protocol.ColumnText && col.Kind != protocol.ColumnBinary {
		return Cell{Kind: col.Kind}
	}
	off := len(c.Arena)
	c.Arena = append(c.Arena, col.Data...)
	return Cell{Kind: col.Kind, Off: int32(off), Len: int32(len(col.Data))}
}

func (c *Compactor) Bytes(x Cell) []byte {
	if x.Kind != protocol.ColumnText && x.Kind != protocol.ColumnBinary {
		return nil
	}
	return c.Arena[x.Off : x.Off+x.Len]
}

// RowKey renders the key columns of a tuple into dst, for use as a map
// key: looked up as t.Rows[string(k)] it costs no allocation; a new row's
// key is copied into the slab (slab.key), not allocated.
func RowKey(dst []byte, e *relmap.Entry, t *protocol.TupleData) []byte {
	b := dst[:0]
	for _, i := range e.Key {
		col := &t.Columns[i]
		b = append(b, col.Kind)
		b = strconv.AppendInt(b, int64(len(col.Data)), 10)
		b = append(b, ':')
		b = append(b, col.Data...)
	}
	return b
}

func (c *Compactor) KeyCells(e *relmap.Entry, t *protocol.TupleData) []Cell {
	k := c.slab.cells(len(e.Key))
	for n, i := range e.Key {
		k[n] = c.Put(&t.Columns[i])
	}
	return k
}

// Image stores t's values in the arena; base, when given, is the row's
// image so far, which an unchanged TOAST value keeps, and whose cells are
// overwritten in place (each is read before it is written): merging an
// update into a row allocates nothing.
func (c *Compactor) Image(t *protocol.TupleData, base []Cell) []Cell {
	img := base
	if len(img) != len(t.Columns) {
		img = c.slab.cells(len(t.Columns))
	}
	for i := range t.Columns {
		col := &t.Columns[i]
		if col.Kind == protocol.ColumnUnchanged && base != nil && base[i].Kind != protocol.ColumnUnchanged {
			img[i] = base[i] // an unchanged TOAST value keeps the image's value
			continue
		}
		img[i] = c.Put(col)
	}
	return img
}

func (c *Compactor) Table(e *relmap.Entry) *Table {
	t := c.ByRel[e.Rel.RelationID]
	if t == nil || t.E != e {
		t = &Table{E: e, Rows: map[string]*Row{}}
		c.ByRel[e.Rel.RelationID] = t
	}
	if !t.used {
		t.used = true
		c.Tables = append(c.Tables, t)
	}
	return t
}

// Add records a change. It returns false when the change cannot be folded
// into the net state (the caller then writes out what is pending and applies
// the change as it comes).
func (c *Compactor) Add(e *relmap.Entry, msg protocol.Message) bool {
	switch m := msg.(type) {
	case *protocol.Insert:
		if len(m.New.Columns) != len(e.Rel.Columns) {
			return false
		}
		t := c.Table(e)
		c.keyBuf = RowKey(c.keyBuf, e, &m.New)
		r := t.Rows[string(c.keyBuf)]
		switch {
		case r == nil:
			k := c.slab.key(c.keyBuf)
			t.Rows[k] = c.slab.row(Row{Kind: NetInsert, Image: c.Image(&m.New, nil)})
			t.Order = append(t.Order, k)
		case r.Kind == NetDelete:
			r.Kind, r.Image = NetReplace, c.Image(&m.New, nil)
		case r.Kind == NetNothing:
			r.Kind, r.Image = NetInsert, c.Image(&m.New, nil)
		default:
			return false // a duplicate key: let the target say so, in order
		}
	case *protocol.Update:
		if len(m.New.Columns) != len(e.Rel.Columns) || (m.OldKind != 0 && len(m.Old.Columns) != len(e.Rel.Columns)) {
			return false
		}
		c.keyBuf = RowKey(c.keyBuf, e, &m.New)
		if m.OldKind != 0 {
			c.oldKeyBuf = RowKey(c.oldKeyBuf, e, &m.Old)
			if !bytes.Equal(c.oldKeyBuf, c.keyBuf) {
				return false // the key changes
			}
		}
		t := c.Table(e)
		r := t.Rows[string(c.keyBuf)]
		switch {
		case r == nil:
			k := c.slab.key(c.keyBuf)
			t.Rows[k] = c.slab.row(Row{Kind: NetUpdate, Image: c.Image(&m.New, nil), Key: c.KeyCells(e, &m.New)})
			t.Order = append(t.Order, k)
		case r.Kind == NetInsert || r.Kind == NetUpdate || r.Kind == NetReplace:
			r.Image = c.Image(&m.New, r.Image)
		default:
			return false // updating a row deleted in this group
		}
	case *protocol.Delete:
		if len(m.Old.Columns) != len(e.Rel.Columns) {
			return false
		}
		t := c.Table(e)
		c.keyBuf = RowKey(c.keyBuf, e, &m.Old)
		r := t.Rows[string(c.keyBuf)]
		switch {
		case r == nil:
			k := c.slab.key(c.keyBuf)
			t.Rows[k] = c.slab.row(Row{Kind: NetDelete, Key: c.KeyCells(e, &m.Old)})
			t.Order = append(t.Order, k)
		case r.Kind == NetInsert:
			r.Kind, r.Image = NetNothing, nil
		case r.Kind == NetUpdate || r.Kind == NetReplace:
			if r.Key == nil {
				r.Key = c.KeyCells(e, &m.Old)
			}
			r.Kind, r.Image = NetDelete, nil
		default:
			return false
		}
	default:
		return false
	}
	c.N++
	return true
}
