package apply

import (
	"bytes"
	"context"
	"encoding/binary"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/apply/internal/compact"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/protocol"
)

// sendStep is one part of a queue that holds a COPY: a batch of
// statements, or one COPY with its data.
type sendStep struct {
	batch *pgconn.Batch
	sql   string // COPY ... FROM STDIN
	data  []byte // its rows, in the format sql names
}

// stmtResult is the outcome of one queued statement.
type stmtResult struct {
	tag       pgconn.CommandTag
	err       error
	conflicts []string // first values of the rows it returned (conflicts it recorded)
}

// readBatch reads the results of a batch, passing each statement's to
// each in order. It returns how many statements it read and the error that
// ended the batch, which may also be the last statement's.
func readBatch(mrr *pgconn.MultiResultReader, each func(i int, r stmtResult)) (int, error) {
	i := 0
	for mrr.NextResult() {
		rr := mrr.ResultReader()
		var r stmtResult
		for rr.NextRow() {
			if v := rr.Values(); len(v) > 0 {
				r.conflicts = append(r.conflicts, string(v[0]))
			}
		}
		r.tag, r.err = rr.Close()
		each(i, r)
		i++
	}
	return i, mrr.Close()
}

// closeBatch ends the statements queued since the last step as a step.
func (s *targetSession) closeBatch() {
	if len(s.queued) > s.closed {
		s.steps = append(s.steps, sendStep{batch: s.batch})
		s.batch = &pgconn.Batch{}
		s.closed = len(s.queued)
	}
}

// queueCopy queues a COPY of rows into rel; data is kept until the batch's
// results are read.
//
// COPY inside a group. A run of inserts into one table that the compactor
// writes out (compact_write.go) is sent with COPY when it is long enough:
// the target then inserts the rows in multi-row heap writes instead of one
// executor row at a time. Timed directly on PostgreSQL 18 (rounds of 10,000
// rows of bench's small table, alternating), an inserted row took 2.5–5.0
// µs with text COPY against 4.8–8.2 µs through unnest(); in walbench's
// small workload the target's CPU per drain fell from 0.84–1.15 s to
// 0.66–0.89 s (three alternating rounds each). A table with row-level
// security enabled keeps INSERT (stream_copy.go says why).
//
// COPY cannot travel in a pipelined batch (pgconn's Batch has no copy-in,
// and the server answers a COPY with a request for its data), so a queue
// that holds one is cut into steps: a batch of statements, a COPY, the
// next batch, and so on, sent in order on one goroutine (stepRunner) while
// the applier goes on preparing the next batch, as with a batch alone. The
// steps share the target transaction; the first failure ends the run, and
// the caller rolls back as for a failed statement.
func (s *targetSession) queueCopy(rel *relmap.Entry, sql string, data []byte) {
	s.closeBatch()
	s.steps = append(s.steps, sendStep{sql: sql, data: data})
	s.queued = append(s.queued, queuedStmt{op: opCopy, rel: rel, xid: s.txnXid, commitLSN: s.txnLSN, firstLSN: s.firstLSN})
	s.closed = len(s.queued)
	s.bytes += len(data)
}

// stepRunner sends the steps of one batch in order on a goroutine of its
// own and collects their results.
type stepRunner struct {
	done    chan struct{}
	results []stmtResult
	err     error // the error that ended the run
}

// runSteps starts sending steps on pg; wait returns what they did. Nothing
// else may use pg until then.
func runSteps(ctx context.Context, pg *pgconn.PgConn, steps []sendStep) *stepRunner {
	r := &stepRunner{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for _, st := range steps {
			if st.batch == nil {
				tag, err := pg.CopyFrom(ctx, bytes.NewReader(st.data), st.sql)
				r.results = append(r.results, stmtResult{tag: tag, err: err})
				if err != nil {
					r.err = err
					return
				}
				continue
			}
			failed := false
			_, err := readBatch(pg.ExecBatch(ctx, st.batch), func(_ int, x stmtResult) {
				failed = failed || x.err != nil
				r.results = append(r.results, x)
			})
			if err != nil || failed {
				r.err = err
				return
			}
		}
	}()
	return r
}

// wait returns the results of the steps once they are all sent and read:
// one per statement up to the first that failed, and the error that ended
// the run early.
func (r *stepRunner) wait() ([]stmtResult, error) {
	<-r.done
	return r.results, r.err
}

// copyFormatOf returns the COPY format in which rows can be sent, given the
// source columns written (cols): protocol.ColumnText or ColumnBinary when
// every value is in that format or NULL (an unchanged TOAST value, NULL in
// an insert), else 0.
func copyFormatOf(rows []*compact.Row, cols []int) byte {
	var want byte
	for _, r := range rows {
		for _, i := range cols {
			var ok bool
			if want, ok = foldCopyFormat(want, r.Image[i].Kind); !ok {
				return 0
			}
		}
	}
	return copyFormatOr(want)
}

// copyData encodes rows for COPY in format: text rows escaped as COPY's
// text format requires (copyRun.encode), or binary rows of send-format
// values (copyRun.encodeBinary), NULL for NULL and unchanged TOAST values.
func copyData(c *compact.Compactor, dst []byte, rows []*compact.Row, cols []int, format byte) []byte {
	if format == protocol.ColumnBinary {
		dst = append(dst, copyBinaryHeader...)
	}
	for _, r := range rows {
		if format == protocol.ColumnBinary {
			dst = binary.BigEndian.AppendUint16(dst, uint16(len(cols)))
		}
		for n, i := range cols {
			x := r.Image[i]
			if format == protocol.ColumnBinary {
				if x.Kind != protocol.ColumnBinary {
					dst = binary.BigEndian.AppendUint32(dst, 0xffffffff)
					continue
				}
				dst = binary.BigEndian.AppendUint32(dst, uint32(x.Len))
				dst = append(dst, c.Bytes(x)...)
				continue
			}
			if n > 0 {
				dst = append(dst, '\t')
			}
			if x.Kind != protocol.ColumnText {
				dst = append(dst, '\\', 'N')
				continue
			}
			dst = appendCopyText(dst, c.Bytes(x))
		}
		if format != protocol.ColumnBinary {
			dst = append(dst, '\n')
		}
	}
	if format == protocol.ColumnBinary {
		dst = append(dst, 0xff, 0xff)
	}
	return dst
}
