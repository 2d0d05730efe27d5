package parallel

import (
	"context"

	"github.com/walapply/walapply/apply/internal/copydata"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/protocol"
)

// copyRun is a worker's run of inserts into one relation, sent with COPY
// as it streams, without net-effect compaction.
//
// Why not through the compactor. A long streamed transaction is mostly a
// bulk insert, and for rows that are all new the compactor buys nothing:
// each row costs a map entry, a copy of its values into the arena and a
// second pass to encode it for COPY (the 1M-row run of BenchmarkStreamedBig
// spent a third of walapply's CPU there and in the garbage collector). So,
// as the spill path's replay does (apply/internal/engine/stream_copy.go), once a run of
// inserts into one relation is longer than the worker's minRun, the rows
// that follow are encoded for COPY straight from the decoded message into
// a buffer reused from one COPY to the next, and sent as one COPY per
// copyBytes.
//
// What is applied does not change. The net state is written out before
// the run starts, and the run ends (its COPY queued) before anything else
// is queued: another message of the stream block (a change of another
// relation or kind, a Relation message for the relation, a new
// subtransaction's savepoint), a subtransaction's abort, the commit or
// prepare. The end of a stream block does not end it: the source streams
// a transaction in blocks of logical_decoding_work_mem (64kB by default),
// a few hundred rows, and a run cut there would send each block's first
// minRun rows as INSERTs and the rest as a tiny COPY. The rows of a run
// wait for the next block in the buffer instead (at most copyBytes, sent
// at the commit at the latest), which changes nothing the target or
// another transaction can see: they are not visible before the commit. So
// the target sees the changes in the source's order, and the rows of the
// run with COPY's semantics, which are the INSERT's (apply's copyRun says
// why); a relation that COPY cannot take (copydata.SQL), rows mixing text
// and binary values, a conflict policy for insert_exists (an INSERT ... ON
// CONFLICT) and the value check of a retry (Applier.MayCopy) keep the
// ordinary path.
//
// Buffers. Every COPY is sent at once (Applier.Send: after the results of
// the batch before it are read), so when one is sent, the buffer of the
// COPY before it is free again: two buffers alternate, and memory stays at
// two COPYs' worth whatever the size of the transaction.
type copyRun struct {
	rel uint32 // the relation of the current run of inserts, and its length
	n   int
	// no: the run's rows take the ordinary path (see above).
	no bool
	// active: rows are being encoded into buf for sql, in format, for e.
	active bool
	sql    string
	e      *relmap.Entry
	format byte
	buf    []byte
	rows   int64  // in buf
	spare  []byte // the other buffer, free once the COPY sent last is done
	sent   []byte // the buffer of the COPY sent last
	// copies counts the COPYs sent for the transaction (logged at its
	// commit, read by the run loop once the commit's reply is in).
	copies int
}

// copyBytes is the size of one COPY of a worker's run of inserts.
const copyBytes = 1 << 20

// reset forgets the run and its buffers (a new transaction, or a failure:
// a batch that failed may still be referenced by nothing but its runner).
func (c *copyRun) reset() {
	*c = copyRun{spare: c.spare[:0]}
}

// buffer returns an empty buffer for the next COPY, with the binary
// format's header when the run is binary.
func (c *copyRun) buffer() []byte {
	b := c.spare
	if cap(b) > 0 {
		c.spare = nil
		b = b[:0]
	} else {
		b = make([]byte, 0, copyBytes+64<<10)
	}
	if c.format == protocol.ColumnBinary {
		b = append(b, copydata.BinaryHeader...)
	}
	return b
}

// encode appends one row to the run's buffer.
func (c *copyRun) encode(t *protocol.TupleData) {
	c.buf = copydata.AppendTuple(c.buf, c.e, t, c.format)
	c.rows++
}

// copyInsert takes an insert into the current run when it belongs there,
// starting the run when it becomes long enough; it reports whether it took
// it (false: the caller applies it the ordinary way).
func (w *Worker) copyInsert(ctx context.Context, ins *protocol.Insert) (bool, error) {
	c, a := &w.cp, w.app
	if c.active {
		if ins.RelationID == c.rel && copydata.TupleFormat(c.e, &ins.New, c.format) == c.format {
			c.encode(&ins.New)
			if len(c.buf) >= copyBytes {
				return true, w.sendCopy(ctx)
			}
			return true, nil
		}
		if err := w.endCopy(ctx); err != nil {
			return true, err
		}
	}
	if ins.RelationID != c.rel {
		c.rel, c.n, c.no = ins.RelationID, 0, false
	}
	if c.n++; c.n <= w.minRun || c.no {
		return false, nil
	}
	if !a.MayCopy() {
		c.no = true
		return false, nil
	}
	e, err := a.Relation(ctx, ins.RelationID)
	if err != nil {
		return true, err
	}
	format := copydata.TupleFormat(e, &ins.New, 0)
	if format == 0 {
		return false, nil // this row; the next may fit
	}
	sql, ok := copydata.SQL(e, format)
	if !ok {
		c.no = true
		return false, nil
	}
	// What is pending goes first.
	if err := a.WriteOut(ctx); err != nil {
		return true, err
	}
	c.active, c.sql, c.e, c.format, c.rows = true, sql, e, format, 0
	c.buf = c.buffer()
	c.encode(&ins.New)
	return true, nil
}

// endCopy ends the run of inserts, if one is being copied: its COPY is
// sent. The next insert starts counting a run anew.
func (w *Worker) endCopy(ctx context.Context) error {
	c := &w.cp
	c.rel, c.n, c.no = 0, 0, false
	if !c.active {
		return nil
	}
	c.active = false
	return w.sendCopy(ctx)
}

// sendCopy queues the run's rows encoded so far as one COPY and sends the
// queue; a run still active goes on in the other buffer.
func (w *Worker) sendCopy(ctx context.Context) error {
	c, a := &w.cp, w.app
	if c.rows == 0 {
		if c.spare == nil {
			c.spare = c.buf
		}
		c.buf = nil
		return nil
	}
	data := c.buf
	if c.format == protocol.ColumnBinary {
		data = append(data, copydata.BinaryTrailer...)
	}
	a.QueueCopy(c.e, c.sql, data, c.rows)
	c.rows, c.buf = 0, nil
	c.copies++
	if err := a.Send(ctx); err != nil {
		c.reset()
		return err
	}
	// The batch before this one is done: so is the COPY sent before.
	c.spare, c.sent = c.sent, data
	if c.active {
		c.buf = c.buffer()
	}
	return nil
}
