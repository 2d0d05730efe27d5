package apply

import (
	"context"
	"encoding/binary"
	"io"
	"strings"

	"github.com/walapply/walapply/apply/internal/pipeline"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/protocol"
)

// copyMinRun is the number of consecutive inserts into one relation after
// which the rest of the run is sent with COPY.
const copyMinRun = 64

// insertsMayCopy reports whether a long run of inserts may go as one COPY
// (the spill path's replay and the parallel workers both ask): not in the
// retry that checks values one by one (valuecheck.go), and not with an
// insert_exists policy other than error, since COPY can neither skip nor
// overwrite the target's row (INSERT ... ON CONFLICT can).
func (a *applier) insertsMayCopy() bool {
	return !a.checking() && a.policies[ConflictInsertExists] == PolicyError
}

// copyInserts sends first and the inserts into the same relation that follow
// it in the spill file with one COPY. It returns false, having done nothing,
// when the rows cannot be copied; the message that ended the run is left in
// p.stash.
func (a *applier) copyInserts(ctx context.Context, p *replayer, first *protocol.Insert) (bool, error) {
	e, err := a.relation(ctx, first.RelationID, pipeline.OpInsert)
	if err != nil {
		return false, a.fail(ctx, err)
	}
	format := copyFormat(e, &first.New, 0)
	if format == 0 {
		return false, nil
	}
	sql, ok := copySQL(e, format)
	if !ok {
		return false, nil
	}
	// COPY needs the connection to itself: what is queued goes first.
	if failed, err := a.sess.Flush(ctx); err != nil {
		return true, a.failStmt(ctx, failed, err)
	}
	c := &copyRun{p: p, e: e, rel: first.RelationID, format: format, buf: make([]byte, 0, 64<<10)}
	if format == protocol.ColumnBinary {
		c.buf = append(c.buf, copyBinaryHeader...)
	}
	c.encode(&first.New)
	err = a.sess.CopyFrom(ctx, c, sql)
	a.Stats.Inserts.Add(c.rows)
	a.Stats.CopiedRows.Add(c.rows)
	if c.err != nil { // reading the spill file failed; COPY was aborted
		return true, a.fail(ctx, c.err)
	}
	if err != nil {
		// Named as a queued COPY's failure is: the column, and a retry
		// that checks the value (valuecheck.go).
		return true, a.failQueued(ctx, &pipeline.Stmt{Op: pipeline.OpCopy, Rel: e, Xid: a.txn.xid, CommitLSN: a.txn.finalLSN, FirstLSN: a.txn.finalLSN}, err)
	}
	return true, nil
}

// copyFormat returns the COPY format an insert's tuple can be sent in:
// protocol.ColumnText or protocol.ColumnBinary when all its written values
// are in that format or NULL, else 0. A tuple of NULLs alone fits want
// (0: text).
func copyFormat(e *relmap.Entry, t *protocol.TupleData, want byte) byte {
	if len(t.Columns) != len(e.Rel.Columns) {
		return 0 // the ordinary path reports it
	}
	for i := range t.Columns {
		if e.Tcol[i] < 0 {
			continue
		}
		var ok bool
		if want, ok = foldCopyFormat(want, t.Columns[i].Kind); !ok {
			return 0
		}
	}
	return copyFormatOr(want)
}

// foldCopyFormat folds a value of kind k into the COPY format a row or run
// needs so far (want, 0 while only NULLs were seen); ok is false when k is
// text and want binary or the other way round.
func foldCopyFormat(want, k byte) (byte, bool) {
	if k != protocol.ColumnText && k != protocol.ColumnBinary {
		return want, true
	}
	return k, want == 0 || want == k
}

// copyFormatOr is the format foldCopyFormat arrived at, text when there
// were only NULLs.
func copyFormatOr(want byte) byte {
	if want == 0 {
		return protocol.ColumnText
	}
	return want
}

// copyBinaryHeader starts the data of a binary COPY: signature, flags,
// header extension length.
var copyBinaryHeader = []byte("PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00")

// copySQL returns the COPY statement for a relation's written columns; ok
// is false when inserts into the relation cannot go by COPY: no column is
// written, or the table has row-level security enabled (see copyRun).
func copySQL(e *relmap.Entry, format byte) (sql string, ok bool) {
	if e.Target.RowSecurity {
		return "", false
	}
	var b strings.Builder
	b.WriteString("COPY ")
	b.WriteString(e.Target.Quoted)
	b.WriteString(" (")
	n := 0
	for i := range e.Rel.Columns {
		if ti := e.Tcol[i]; ti >= 0 {
			if n > 0 {
				b.WriteString(", ")
			}
			b.WriteString(sqlgen.QuoteIdent(e.Target.Columns[ti].Name))
			n++
		}
	}
	b.WriteString(") FROM STDIN")
	if format == protocol.ColumnBinary {
		b.WriteString(" (FORMAT binary)")
	}
	return b.String(), n > 0
}

// copyRun is the data of one COPY: rows in COPY's text format, encoded from
// the spill file as CopyFrom asks for them.
//
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
// partitions, and any error aborts the target transaction. With --binary
// the rows go in COPY's binary format, which carries the same send-format
// bytes the INSERT would have bound; a row mixing text and binary values
// (a type without a binary send function) takes the ordinary path, and so
// does every insert into a table with row-level security enabled: COPY FROM
// refuses it for a role the policies apply to, where INSERT applies them.
//
// The rows are read from the spill file while COPY runs: pgconn's CopyFrom
// pulls them through copyRun.Read (on a goroutine of its own, while this one
// waits), so memory stays bounded by one 64 KiB chunk and the largest row.
type copyRun struct {
	p      *replayer
	e      *relmap.Entry
	rel    uint32
	format byte   // protocol.ColumnText or protocol.ColumnBinary
	buf    []byte // encoded rows not yet handed to CopyFrom
	done   bool
	rows   int64
	err    error // reading the spill file failed
	// trailer: the binary format's end marker is in buf
	trailer bool
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
		if !ok || ins.RelationID != c.rel || copyFormat(c.e, &ins.New, c.format) != c.format {
			c.p.stash, c.done = msg, true
			break
		}
		c.encode(&ins.New)
	}
	if c.done && c.format == protocol.ColumnBinary && !c.trailer {
		c.buf = append(c.buf, 0xff, 0xff) // the file trailer: a field count of -1
		c.trailer = true
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
	if c.format == protocol.ColumnBinary {
		c.encodeBinary(t)
		return
	}
	b := c.buf
	first := true
	for i := range t.Columns {
		if c.e.Tcol[i] < 0 {
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

// copyEscapes maps the bytes COPY's text format escapes to the letter after
// the backslash: backslash, newline, carriage return and the tab delimiter.
var copyEscapes = [256]byte{'\\': '\\', '\n': 'n', '\r': 'r', '\t': 't'}

// appendCopyText appends a value escaped for COPY's text format.
func appendCopyText(dst, v []byte) []byte {
	start := 0
	for i, ch := range v {
		if esc := copyEscapes[ch]; esc != 0 {
			dst = append(dst, v[start:i]...)
			dst = append(dst, '\\', esc)
			start = i + 1
		}
	}
	return append(dst, v[start:]...)
}

// encodeBinary appends one row in COPY's binary format: the field count,
// then each field's length (-1 for NULL) and its bytes, which are the
// type's binary send format, as pgoutput sends them with binary = true.
func (c *copyRun) encodeBinary(t *protocol.TupleData) {
	b := c.buf
	n := 0
	for i := range t.Columns {
		if c.e.Tcol[i] >= 0 {
			n++
		}
	}
	b = binary.BigEndian.AppendUint16(b, uint16(n))
	for i := range t.Columns {
		if c.e.Tcol[i] < 0 {
			continue
		}
		col := &t.Columns[i]
		if col.Kind != protocol.ColumnBinary {
			b = binary.BigEndian.AppendUint32(b, 0xffffffff) // NULL
			continue
		}
		b = binary.BigEndian.AppendUint32(b, uint32(len(col.Data)))
		b = append(b, col.Data...)
	}
	c.buf = b
	c.rows++
}
