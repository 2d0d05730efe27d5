package engine

import (
	"context"
	"io"

	"github.com/walapply/walapply/apply/internal/copydata"
	"github.com/walapply/walapply/apply/internal/pipeline"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/protocol"
)

// CopyMinRun is the number of consecutive inserts into one relation after
// which the rest of the run is sent with COPY.
const CopyMinRun = 64

// insertsMayCopy reports whether a long run of inserts may go as one COPY
// (the spill path's replay and the parallel workers both ask): not in the
// retry that checks values one by one (valuecheck.go), and not with an
// insert_exists policy other than error, since COPY can neither skip nor
// overwrite the target's row (INSERT ... ON CONFLICT can).
func (a *Applier) insertsMayCopy() bool {
	return !a.checking() && a.policies[ConflictInsertExists] == PolicyError
}

// copyInserts sends first and the inserts into the same relation that follow
// it in the spill file with one COPY. It returns false, having done nothing,
// when the rows cannot be copied; the message that ended the run is left in
// p.stash.
func (a *Applier) copyInserts(ctx context.Context, p *replayer, first *protocol.Insert) (bool, error) {
	e, err := a.relation(ctx, first.RelationID, pipeline.OpInsert)
	if err != nil {
		return false, a.fail(ctx, err)
	}
	format := copydata.TupleFormat(e, &first.New, 0)
	if format == 0 {
		return false, nil
	}
	sql, ok := copydata.SQL(e, format)
	if !ok {
		return false, nil
	}
	// COPY needs the connection to itself: what is queued goes first.
	if failed, err := a.sess.Flush(ctx); err != nil {
		return true, a.failStmt(ctx, failed, err)
	}
	c := &copyRun{p: p, e: e, rel: first.RelationID, format: format, buf: make([]byte, 0, 64<<10)}
	if format == protocol.ColumnBinary {
		c.buf = append(c.buf, copydata.BinaryHeader...)
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

// copyRun is the data of one COPY: rows in COPY's text format, encoded from
// the spill file as CopyFrom asks for them.
//
// Long runs of inserts into one table, the bulk of most large transactions,
// are replayed with COPY instead of one INSERT each: the target then parses
// and inserts rows without per-statement overhead (executor start-up, a
// portal per row), which is what lets the replay keep up with PostgreSQL's
// own apply worker. The first CopyMinRun inserts of a run take the ordinary
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
		if !ok || ins.RelationID != c.rel || copydata.TupleFormat(c.e, &ins.New, c.format) != c.format {
			c.p.stash, c.done = msg, true
			break
		}
		c.encode(&ins.New)
	}
	if c.done && c.format == protocol.ColumnBinary && !c.trailer {
		c.buf = append(c.buf, copydata.BinaryTrailer...)
		c.trailer = true
	}
	if len(c.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(b, c.buf)
	c.buf = c.buf[:copy(c.buf, c.buf[n:])]
	return n, nil
}

// encode appends one row (copydata.AppendTuple).
func (c *copyRun) encode(t *protocol.TupleData) {
	c.buf = copydata.AppendTuple(c.buf, c.e, t, c.format)
	c.rows++
}
