package apply

import (
	"bytes"
	"context"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/protocol"
)

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

// maxCompactRows bounds the rows held for compaction before they are
// written out.
const maxCompactRows = 5000

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
type compactor struct {
	tables            []*netTable
	byRel             map[uint32]*netTable
	arena             []byte
	n                 int
	keyBuf, oldKeyBuf []byte
}

// newCompactor returns an empty compactor. Its arena starts non-nil: an
// empty value is an empty, non-nil slice of it, and nil means NULL to the
// statements built from it.
func newCompactor() *compactor {
	return &compactor{byRel: map[uint32]*netTable{}, arena: make([]byte, 0, 4096)}
}

func (c *compactor) empty() bool { return c.n == 0 }

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

func (c *compactor) image(t *protocol.TupleData, base []cell) []cell {
	img := make([]cell, len(t.Columns))
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
// the file comment).
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
		if checkWidth(e, &m.New, "Insert") != nil {
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
		if checkWidth(e, &m.New, "new") != nil || (m.OldKind != 0 && checkWidth(e, &m.Old, "old") != nil) {
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
		if checkWidth(e, &m.Old, "old") != nil {
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

// unchanged reports whether any column of an image is an unchanged TOAST
// value (then the row needs an UPDATE that leaves it out).
func hasUnchanged(img []cell) bool {
	for _, x := range img {
		if x.kind == protocol.ColumnUnchanged {
			return true
		}
	}
	return false
}

// writeOut queues the pending net changes as statements, table by table:
// deletes, then updates, then inserts (a replaced row is deleted, then
// inserted), and empties the compactor.
func (a *Applier) writeOut(ctx context.Context) error {
	c := a.net
	if c.n == 0 {
		return nil
	}
	for _, t := range c.tables {
		var dels, ups, ins []*netRow
		for _, k := range t.order {
			r := t.rows[k]
			switch r.kind {
			case netDelete:
				dels = append(dels, r)
			case netUpdate:
				ups = append(ups, r)
			case netInsert:
				ins = append(ins, r)
			case netReplace:
				dels = append(dels, r)
				ins = append(ins, r)
			}
		}
		if err := a.writeDeletes(ctx, t.e, dels); err != nil {
			return err
		}
		if err := a.writeUpdates(ctx, t.e, ups); err != nil {
			return err
		}
		if err := a.writeInserts(ctx, t.e, ins); err != nil {
			return err
		}
	}
	c.tables, c.arena, c.n = c.tables[:0], c.arena[:0], 0
	clear(c.byRel)
	return nil
}

// chunkSizes are the row counts of multi-row statements; a run is written
// in the largest chunks first, so that each table needs few statements.
var chunkSizes = []int{256, 32, 4, 1}

// chunks calls fn for consecutive chunks of rows, each of a size from
// chunkSizes that also keeps the parameter count under PostgreSQL's limit.
func chunks(rows []*netRow, perRow int, fn func([]*netRow) error) error {
	for len(rows) > 0 {
		n := 1
		for _, s := range chunkSizes {
			if s <= len(rows) && s*perRow <= 65535 {
				n = s
				break
			}
		}
		if err := fn(rows[:n]); err != nil {
			return err
		}
		rows = rows[n:]
	}
	return nil
}

func (a *Applier) addCell(x cell) {
	a.params = append(a.params, a.net.bytes(x))
	f := int16(0)
	if x.kind == protocol.ColumnBinary {
		f = 1
	}
	a.formats = append(a.formats, f)
}

// multiStatement returns the prepared statement of a multi-row shape.
func (a *Applier) multiStatement(ctx context.Context, e *relEntry, shape string, build func() (string, []uint32)) (*pgconn.StatementDescription, error) {
	if sd, ok := e.stmts[shape]; ok {
		return sd, nil
	}
	sql, oids := build()
	sd, err := a.sess.statementFor(ctx, sql, oids)
	if err != nil {
		return nil, &TxnError{Xid: a.txn.xid, CommitLSN: a.txn.finalLSN, Relation: e.String(), Op: "preparing a statement", Err: err}
	}
	e.stmts[shape] = sd
	return sd, nil
}

// valuesList writes n rows of cols placeholders: ($1, $2), ($3, $4), ...
func valuesList(b *strings.Builder, n, cols, first int) {
	p := first
	for r := 0; r < n; r++ {
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for c := 0; c < cols; c++ {
			if c > 0 {
				b.WriteString(", ")
			}
			writeParam(b, p)
			p++
		}
		b.WriteByte(')')
	}
}

// keyMatch writes the join of the target's key columns with v's first
// columns.
func keyMatch(b *strings.Builder, e *relEntry) {
	for n, i := range e.key {
		if n > 0 {
			b.WriteString(" AND ")
		}
		tc := e.target.Columns[e.tcol[i]]
		b.WriteString("_t.")
		b.WriteString(quoteIdent(tc.Name))
		if tc.EqSchema != "" {
			b.WriteString(" OPERATOR(" + quoteIdent(tc.EqSchema) + ".=) ")
		} else {
			b.WriteString(" = ")
		}
		b.WriteString("_v.column" + strconv.Itoa(n+1))
	}
}

func (a *Applier) writeInserts(ctx context.Context, e *relEntry, rows []*netRow) error {
	var cols []int // source columns written
	for i := range e.rel.Columns {
		if e.tcol[i] >= 0 {
			cols = append(cols, i)
		}
	}
	if len(cols) == 0 {
		for range rows {
			sd, err := a.statement(ctx, e, 'I', nil, nil, false)
			if err != nil {
				return err
			}
			a.params, a.formats = a.params[:0], a.formats[:0]
			a.sess.queueStmt(opInsert, e, sd, a.params, a.formats, 0, 0)
		}
		return nil
	}
	arrays, each := a.rowForm(rows)
	return each(rows, len(cols), func(rs []*netRow) error {
		sd, err := a.multiStatement(ctx, e, shapeName("I", arrays, len(rs)), func() (string, []uint32) {
			var b strings.Builder
			b.WriteString("INSERT INTO " + e.target.Quoted + " (")
			var oids []uint32
			var types []string
			for n, i := range cols {
				if n > 0 {
					b.WriteString(", ")
				}
				tc := e.target.Columns[e.tcol[i]]
				b.WriteString(quoteIdent(tc.Name))
				oids = append(oids, tc.TypeOID)
				types = append(types, tc.CastType)
			}
			b.WriteString(") ")
			writeRowSource(&b, arrays, len(rs), types)
			return b.String(), rowParamOIDs(arrays, len(rs), oids)
		})
		if err != nil {
			return err
		}
		a.params, a.formats = a.params[:0], a.formats[:0]
		for _, r := range rs {
			for _, i := range cols {
				x := r.image[i]
				if x.kind == protocol.ColumnUnchanged {
					x.kind = protocol.ColumnNull // as PostgreSQL does for an INSERT
				}
				a.addCell(x)
			}
		}
		if arrays {
			a.packArrays(len(cols))
		}
		a.sess.queueStmt(opInsert, e, sd, a.params, a.formats, 0, 0)
		a.Stats.Inserts.Add(int64(len(rs)))
		return nil
	})
}

func (a *Applier) writeUpdates(ctx context.Context, e *relEntry, rows []*netRow) error {
	// Rows whose images hold unchanged TOAST values need SET lists without
	// those columns: rows are written in runs of the same set of columns
	// (their order does not matter: every row has its own key).
	var order []string
	runs := map[string][]*netRow{}
	for _, r := range rows {
		m := make([]byte, len(r.image))
		for i, x := range r.image {
			m[i] = '0'
			if x.kind == protocol.ColumnUnchanged {
				m[i] = '1'
			}
		}
		k := string(m)
		if _, ok := runs[k]; !ok {
			order = append(order, k)
		}
		runs[k] = append(runs[k], r)
	}
	for _, k := range order {
		if err := a.writeUpdateRun(ctx, e, runs[k]); err != nil {
			return err
		}
	}
	return nil
}

// writeUpdateRun writes updates whose images leave out the same columns.
func (a *Applier) writeUpdateRun(ctx context.Context, e *relEntry, rows []*netRow) error {
	var set []int
	mask := make([]byte, 0, len(e.rel.Columns))
	for i := range e.rel.Columns {
		if e.tcol[i] >= 0 && rows[0].image[i].kind != protocol.ColumnUnchanged {
			set = append(set, i)
			mask = append(mask, '1')
		} else {
			mask = append(mask, '0')
		}
	}
	if len(set) == 0 {
		return nil // nothing to write: every column is unchanged
	}
	per := len(e.key) + len(set)
	conflict, fail := a.wraps('U')
	width := per
	if conflict != "" {
		width++ // the row's key as text, for the conflict record
	}
	arrays, each := a.rowForm(rows)
	return each(rows, width, func(rs []*netRow) error {
		sd, err := a.multiStatement(ctx, e, shapeName("U"+string(mask), arrays, len(rs)), func() (string, []uint32) {
			types := e.typeNames(e.key, nil)
			types = e.typeNames(set, types)
			if conflict != "" {
				types = append(types, "pg_catalog.text")
			}
			var b strings.Builder
			if conflict != "" {
				b.WriteString("WITH _v AS (")
				writeRowSource(&b, arrays, len(rs), types)
				b.WriteString("), _w AS (")
			}
			b.WriteString("UPDATE " + e.target.Quoted + " AS _t SET ")
			for n, i := range set {
				if n > 0 {
					b.WriteString(", ")
				}
				b.WriteString(quoteIdent(e.target.Columns[e.tcol[i]].Name))
				b.WriteString(" = _v.column" + strconv.Itoa(len(e.key)+n+1))
			}
			if conflict != "" {
				b.WriteString(" FROM _v")
			} else {
				b.WriteString(" FROM (")
				writeRowSource(&b, arrays, len(rs), types)
				b.WriteString(") AS _v")
			}
			b.WriteString(" WHERE ")
			keyMatch(&b, e)
			var oids []uint32
			for _, i := range e.key {
				oids = append(oids, e.target.Columns[e.tcol[i]].TypeOID)
			}
			for _, i := range set {
				oids = append(oids, e.target.Columns[e.tcol[i]].TypeOID)
			}
			return finishMissing(&b, conflict, fail, arrays, width, len(rs), oids)
		})
		if err != nil {
			return err
		}
		a.params, a.formats = a.params[:0], a.formats[:0]
		keyStart := len(a.sess.keys)
		for _, r := range rs {
			for _, x := range r.key {
				a.addCell(x)
			}
			for _, i := range set {
				a.addCell(r.image[i])
			}
			if conflict != "" {
				a.addKeyText(e, r)
			}
		}
		if arrays {
			a.packArrays(width)
		}
		a.queueMulti(opUpdate, e, sd, rs, keyStart, conflict, fail)
		a.Stats.Updates.Add(int64(len(rs)))
		return nil
	})
}

func (a *Applier) writeDeletes(ctx context.Context, e *relEntry, rows []*netRow) error {
	per := len(e.key)
	conflict, fail := a.wraps('D')
	width := per
	if conflict != "" {
		width++
	}
	arrays, each := a.rowForm(rows)
	return each(rows, width, func(rs []*netRow) error {
		sd, err := a.multiStatement(ctx, e, shapeName("D", arrays, len(rs)), func() (string, []uint32) {
			types := e.typeNames(e.key, nil)
			if conflict != "" {
				types = append(types, "pg_catalog.text")
			}
			var b strings.Builder
			if conflict != "" {
				b.WriteString("WITH _v AS (")
				writeRowSource(&b, arrays, len(rs), types)
				b.WriteString("), _w AS (DELETE FROM " + e.target.Quoted + " AS _t USING _v")
			} else {
				b.WriteString("DELETE FROM " + e.target.Quoted + " AS _t USING (")
				writeRowSource(&b, arrays, len(rs), types)
				b.WriteString(") AS _v")
			}
			b.WriteString(" WHERE ")
			keyMatch(&b, e)
			var oids []uint32
			for _, i := range e.key {
				oids = append(oids, e.target.Columns[e.tcol[i]].TypeOID)
			}
			return finishMissing(&b, conflict, fail, arrays, width, len(rs), oids)
		})
		if err != nil {
			return err
		}
		a.params, a.formats = a.params[:0], a.formats[:0]
		keyStart := len(a.sess.keys)
		for _, r := range rs {
			for _, x := range r.key {
				a.addCell(x)
			}
			if conflict != "" {
				a.addKeyText(e, r)
			}
		}
		if arrays {
			a.packArrays(width)
		}
		a.queueMulti(opDelete, e, sd, rs, keyStart, conflict, fail)
		a.Stats.Deletes.Add(int64(len(rs)))
		return nil
	})
}

// finishMissing ends a multi-row UPDATE or DELETE: the parameter types of
// its rows (oids, one row's worth) and, when the statement handles
// update_missing or delete_missing itself, the outer statement that records
// (or, with fail, raises) the rows the change did not find; width is the
// VALUES list's width, its last column the row's key as text.
func finishMissing(b *strings.Builder, conflict string, fail, arrays bool, width, rows int, oids []uint32) (string, []uint32) {
	if conflict != "" {
		oids = append(oids, 25) // the key as text
	}
	all := rowParamOIDs(arrays, rows, oids)
	if conflict == "" {
		return b.String(), all
	}
	ck := "_v.column" + strconv.Itoa(width)
	b.WriteString(" RETURNING " + ck + ") ")
	if fail {
		raiseInstead(b, conflict, len(all)+1, "string_agg("+ck+", '; ')")
		b.WriteString(" FROM _v WHERE " + ck + " NOT IN (SELECT * FROM _w) HAVING count(*) > 0")
	} else {
		recordInsert(b, conflict, "skipped", len(all)+1, ck)
		b.WriteString(" FROM _v WHERE " + ck + " NOT IN (SELECT * FROM _w) RETURNING key")
	}
	return b.String(), append(all, recordOIDs...)
}

// queueMulti queues a multi-row UPDATE or DELETE whose row parameters are
// in place: it adds the rows' keys for messages and, when the statement
// records its own conflicts, the record parameters.
func (a *Applier) queueMulti(op opKind, e *relEntry, sd *pgconn.StatementDescription, rs []*netRow, keyStart int, conflict string, fail bool) {
	a.sess.keys = a.renderKeys(a.sess.keys, e, rs)
	if conflict != "" {
		a.appendRecordParams(e, nil)
	}
	a.sess.queueStmt(op, e, sd, a.params, a.formats, keyStart, len(a.sess.keys))
	q := &a.sess.queued[len(a.sess.queued)-1]
	q.rows = len(rs)
	if !fail {
		q.conflict = conflict
	}
}

// addKeyText adds a row's key rendered as text, the key of its conflict
// record, as a parameter; the text lives in the compactor's arena.
func (a *Applier) addKeyText(e *relEntry, r *netRow) {
	c := a.net
	start := len(c.arena)
	for j, i := range e.key {
		if j > 0 {
			c.arena = append(c.arena, ", "...)
		}
		c.arena = append(c.arena, e.rel.Columns[i].Name...)
		c.arena = append(c.arena, '=')
		x := r.key[j]
		c.arena = appendValue(c.arena, &protocol.TupleColumn{Kind: x.kind, Data: c.bytes(x)})
	}
	a.params = append(a.params, c.arena[start:len(c.arena):len(c.arena)])
	a.formats = append(a.formats, 0)
}

// renderKeys renders the keys of a multi-row statement for messages.
func (a *Applier) renderKeys(dst []byte, e *relEntry, rs []*netRow) []byte {
	for n, r := range rs {
		if n > 0 {
			dst = append(dst, "; "...)
		}
		if n == 8 {
			dst = append(dst, "..."...)
			break
		}
		for j, i := range e.key {
			if j > 0 {
				dst = append(dst, ", "...)
			}
			dst = append(dst, e.rel.Columns[i].Name...)
			dst = append(dst, '=')
			x := r.key[j]
			dst = appendValue(dst, &protocol.TupleColumn{Kind: x.kind, Data: a.net.bytes(x)})
		}
	}
	return dst
}
