package apply

import (
	"context"
	"io"
	"strings"

	"github.com/walapply/walapply/protocol"
)

// Long runs of inserts into one table, the bulk of most large transactions,
// are replayed with COPY instead of one INSERT each: the target then parses
// and inserts rows without per-statement overhead (executor start-up, a
// portal per row), which is what lets the replay keep up with PostgreSQL's
// own apply worker. The first copyMinRun inserts of a run take the ordinary
// path, so that short runs cost no extra round trip.
//
// COPY behaves like the INSERT it replaces in everything the target can
// observe: the same columns (generated ones left out, so extra target
// columns get their defaults), values in the same text form parsed by the
// same input functions under the same session settings, the same triggers
// (session_replication_role = replica applies to COPY too), routing into
// partitions, and any error aborts the target transaction. Rows with
// binary-format values (--binary) take the ordinary path.
//
// The rows are read from the spill file while COPY runs: pgconn's CopyFrom
// pulls them through copyRun.Read (on a goroutine of its own, while this one
// waits), so memory stays bounded by one 64 KiB chunk and the largest row.

// copyMinRun is the number of consecutive inserts into one relation after
// which the rest of the run is sent with COPY.
const copyMinRun = 64

// copyInserts sends first and the inserts into the same relation that follow
// it in the spill file with one COPY. It returns false, having done nothing,
// when the rows cannot be copied; the message that ended the run is left in
// p.stash.
func (a *Applier) copyInserts(ctx context.Context, p *replayer, first *protocol.Insert) (bool, error) {
	e, err := a.relation(ctx, first.RelationID, "INSERT")
	if err != nil {
		return false, a.fail(ctx, err)
	}
	if !copyableRow(e, &first.New) {
		return false, nil
	}
	sql, ok := copySQL(e)
	if !ok {
		return false, nil
	}
	// COPY needs the connection to itself: what is queued goes first.
	if failed, err := a.sess.flush(ctx); err != nil {
		return true, a.failStmt(ctx, failed, err)
	}
	c := &copyRun{p: p, e: e, rel: first.RelationID, buf: make([]byte, 0, 64<<10)}
	c.encode(&first.New)
	_, err = a.sess.pg.CopyFrom(ctx, c, sql)
	a.Stats.Inserts.Add(c.rows)
	if c.err != nil { // reading the spill file failed; COPY was aborted
		return true, a.fail(ctx, c.err)
	}
	if err != nil {
		return true, a.fail(ctx, &TxnError{Xid: a.txn.xid, CommitLSN: a.txn.finalLSN, Relation: e.String(), Op: "INSERT (COPY)", Err: err})
	}
	return true, nil
}

// copyableRow reports whether an insert's tuple can go into a text COPY.
func copyableRow(e *relEntry, t *protocol.TupleData) bool {
	if len(t.Columns) != len(e.rel.Columns) {
		return false // the ordinary path reports it
	}
	for i := range t.Columns {
		if t.Columns[i].Kind == protocol.ColumnBinary && e.tcol[i] >= 0 {
			return false
		}
	}
	return true
}

// copySQL returns the COPY statement for a relation's written columns.
func copySQL(e *relEntry) (string, bool) {
	var b strings.Builder
	b.WriteString("COPY ")
	b.WriteString(e.target.Quoted)
	b.WriteString(" (")
	n := 0
	for i := range e.rel.Columns {
		if ti := e.tcol[i]; ti >= 0 {
			if n > 0 {
				b.WriteString(", ")
			}
			b.WriteString(quoteIdent(e.target.Columns[ti].Name))
			n++
		}
	}
	b.WriteString(") FROM STDIN")
	return b.String(), n > 0
}

// copyRun is the data of one COPY: rows in COPY's text format, encoded from
// the spill file as CopyFrom asks for them.
type copyRun struct {
	p    *replayer
	e    *relEntry
	rel  uint32
	buf  []byte // encoded rows not yet handed to CopyFrom
	done bool
	rows int64
	err  error // reading the spill file failed
}

// Read fills b with whole rows as far as they fit (one CopyData message per
// call), then the rest of a row that did not.
func (c *copyRun) Read(b []byte) (int, error) {
	for len(c.buf) < len(b) && !c.done {
		msg, err := c.p.next()
		if err != nil {
			c.err, c.done = err, true
			return 0, err
		}
		ins, ok := msg.(*protocol.Insert)
		if !ok || ins.RelationID != c.rel || !copyableRow(c.e, &ins.New) {
			c.p.stash, c.done = msg, true
			break
		}
		c.encode(&ins.New)
	}
	if len(c.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(b, c.buf)
	c.buf = c.buf[:copy(c.buf, c.buf[n:])]
	return n, nil
}

// encode appends one row. NULL and an unchanged TOAST value (NULL in an
// insert, as on the ordinary path) are \N; text values are escaped as COPY's
// text format requires.
func (c *copyRun) encode(t *protocol.TupleData) {
	b := c.buf
	first := true
	for i := range t.Columns {
		if c.e.tcol[i] < 0 {
			continue
		}
		if !first {
			b = append(b, '\t')
		}
		first = false
		col := &t.Columns[i]
		if col.Kind != protocol.ColumnText {
			b = append(b, '\\', 'N')
			continue
		}
		b = appendCopyText(b, col.Data)
	}
	c.buf = append(b, '\n')
	c.rows++
}

// appendCopyText appends a value escaped for COPY's text format: backslash,
// newline, carriage return and the tab delimiter are written as backslash
// sequences.
func appendCopyText(dst, v []byte) []byte {
	start := 0
	for i, ch := range v {
		var esc byte
		switch ch {
		case '\\':
			esc = '\\'
		case '\n':
			esc = 'n'
		case '\r':
			esc = 'r'
		case '\t':
			esc = 't'
		default:
			continue
		}
		dst = append(dst, v[start:i]...)
		dst = append(dst, '\\', esc)
		start = i + 1
	}
	return append(dst, v[start:]...)
}
