package parallel

import "github.com/walapply/walapply/protocol"

// jobKind is what the run loop asks of a worker: the run loop's side of
// the queue is Worker's methods (Begin, Add, Idle, AbortSub, Rollback,
// Commit, Prepare), the worker's side Worker.do.
type jobKind uint8

const (
	jobBegin    jobKind = iota // open the target transaction for xid
	jobChanges                 // apply chunk, messages of a stream block
	jobIdle                    // the block ended: send what is queued (a COPY run goes on)
	jobAbortSub                // roll back to subxid's savepoint
	jobRollback                // roll back; the worker is free again
	jobCommit                  // commit with the origin advanced to end
	jobPrepare                 // prepare as gid with the origin advanced to end
)

// job is one request to a worker.
type job struct {
	kind    jobKind
	xid     uint32
	chunk   *chunk
	subxid  uint32
	end     protocol.LSN
	lsn     protocol.LSN // the commit or prepare LSN
	at      protocol.Timestamp
	gid     string
	applied protocol.LSN // the applier's progress, for a rewind
	reply   chan error
}

// workerQueue bounds the jobs handed to a worker and not yet done.
const workerQueue = 16

// chunk is a run of messages of a stream block handed to a worker at
// once: their bytes one after the other in data, each one's end in ends
// and its subtransaction in subs. The run loop fills one while the worker
// works on those before; a chunk is handed over when it holds chunkBytes
// or chunkMessages, and before any other job, so the worker sees the
// messages in order. One channel operation and no allocation per message
// (chunks are reused through the worker's free list); memory is bounded by
// workerQueue chunks.
type chunk struct {
	data []byte
	ends []int
	subs []uint32
}

// Bounds of a chunk.
const (
	chunkBytes    = 64 << 10
	chunkMessages = 512
)

// push hands a job over (after the chunk being filled), waiting while the
// queue is full.
func (w *Worker) push(j job) {
	w.handOver()
	w.jobs <- j
}

// call hands a job over and waits for its result.
func (w *Worker) call(j job) error {
	j.reply = make(chan error, 1)
	w.push(j)
	return <-j.reply
}

// Begin opens the target transaction of streamed transaction xid.
func (w *Worker) Begin(xid uint32) { w.push(job{kind: jobBegin, xid: xid}) }

// Idle ends a stream block: what is queued is sent.
func (w *Worker) Idle() { w.push(job{kind: jobIdle}) }

// AbortSub rolls the transaction back to subtransaction subxid's
// savepoint.
func (w *Worker) AbortSub(subxid uint32) { w.push(job{kind: jobAbortSub, subxid: subxid}) }

// Rollback rolls the transaction back; the worker is free again.
func (w *Worker) Rollback() { w.push(job{kind: jobRollback}) }

// Commit commits the transaction, committed at lsn on the source and
// ending at end, with the worker's origin advanced to end; applied is the
// run loop's progress, where a rewind goes back to. It waits for the
// COMMIT's result.
func (w *Worker) Commit(lsn, end protocol.LSN, at protocol.Timestamp, applied protocol.LSN) error {
	return w.call(job{kind: jobCommit, end: end, at: at, lsn: lsn, applied: applied})
}

// Prepare prepares the transaction as gid (see Commit).
func (w *Worker) Prepare(lsn, end protocol.LSN, at protocol.Timestamp, gid string, applied protocol.LSN) error {
	return w.call(job{kind: jobPrepare, end: end, at: at, lsn: lsn, gid: gid, applied: applied})
}

// Add appends a message of a stream block (of subtransaction subxid) to
// the chunk being filled, handing the chunk over when it is full. raw is
// copied.
func (w *Worker) Add(raw []byte, subxid uint32) {
	c := w.pend
	if c == nil {
		select {
		case c = <-w.free:
		default:
			c = &chunk{data: make([]byte, 0, chunkBytes+4<<10)}
		}
		w.pend = c
	}
	c.data = append(c.data, raw...)
	c.ends = append(c.ends, len(c.data))
	c.subs = append(c.subs, subxid)
	if len(c.data) >= chunkBytes || len(c.ends) >= chunkMessages {
		w.handOver()
	}
}

// handOver hands the chunk being filled over, if it holds anything.
func (w *Worker) handOver() {
	if c := w.pend; c != nil && len(c.ends) > 0 {
		w.pend = nil
		w.jobs <- job{kind: jobChanges, chunk: c}
	}
}

// recycle returns a chunk the goroutine is done with to the free list.
func (w *Worker) recycle(c *chunk) {
	if cap(c.data) > 4*chunkBytes {
		return // grown by a huge message: let it go
	}
	c.data, c.ends, c.subs = c.data[:0], c.ends[:0], c.subs[:0]
	select {
	case w.free <- c:
	default:
	}
}
