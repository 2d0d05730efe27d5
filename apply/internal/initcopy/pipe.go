package initcopy

import (
	"bufio"
	"bytes"
	"io"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
)

// copyReadBuffer is the read buffer of a copy worker's source connection.
// pgconn reads at most 8 KiB per read(2), which for a copy is a read per
// few dozen rows; with this buffer under it, a read takes whatever the
// socket holds, up to 256 KiB.
const copyReadBuffer = 256 << 10

// bufferSourceReads gives a copy worker's source connection
// copyReadBuffer (a Copier.ConnectSource option).
func bufferSourceReads(pc *pgx.ConnConfig) {
	pc.BuildFrontend = func(r io.Reader, w io.Writer) *pgproto3.Frontend {
		return pgproto3.NewFrontend(bufio.NewReaderSize(r, copyReadBuffer), w)
	}
}

// copyChunk is the size of the chunks a table's rows move in from the
// source to the target. pgconn's CopyTo hands over one CopyData message
// per row, and CopyFrom sends every read of its input as one CopyData
// message and one write(2), with reads of at most 64 KiB less a 5-byte
// header: so a pipe that passed each row on as it came made one write(2)
// per row (issue 17: 5.3 million for 5.3 million rows). A chunk of that
// read size is one message and one write.
const copyChunk = 64<<10 - 5

// copyPipeDepth is how many filled chunks may wait for the target: enough
// that the source side keeps reading while the target backend waits for a
// core, and about 1 MiB per copy worker at most (copyPipeDepth+2 chunks).
// On a machine whose cores are busy each of the three processes a chunk
// passes (source backend, walapply, target backend) waits its turn, and
// with room for 3 chunks the source's side stopped whenever the target's
// did: with a CPU-bound neighbour per core the `copy` workload at half
// size took 7.6–16.9 s (median 9.4) with 3, 7.6–9.1 s (median 8.4) with 16,
// five alternating pairs, at the same CPU and 1.8 MiB more peak RSS.
const copyPipeDepth = 16

// copyPipe carries a table's COPY data from the source's CopyTo (Write, a
// row at a time) to the target's CopyFrom (Read) in chunks of copyChunk
// bytes: a reader waits for a full chunk, or the end. Rows may straddle
// chunks; COPY FROM reads its input as a byte stream. It also counts what
// passes (copyPipe.bytes, .rows) and tells the copy's progress per chunk.
//
// Ending it: the writer calls closeWrite (nil: EOF) and the reader, if it
// gives up first, closeRead, which makes the writer's next Write fail with
// errCopyAborted.
type copyPipe struct {
	full  chan []byte   // filled chunks, to the reader; closed by closeWrite
	free  chan []byte   // read chunks, back to the writer
	abort chan struct{} // closed by closeRead
	once  sync.Once

	// The writer's side.
	cur         []byte
	p           *Progress
	tc          *tableCount // the table's own count in p (nil: none)
	binary      bool
	bytes, rows int64 // counted so far
	told        [2]int64

	// werr is the writer's error, set before full is closed.
	werr error
	// The reader's side: the rest of the chunk being read.
	rd, rdBuf []byte
}

func newCopyPipe(p *Progress, binary bool) *copyPipe {
	return &copyPipe{
		full:   make(chan []byte, copyPipeDepth),
		free:   make(chan []byte, copyPipeDepth+2),
		abort:  make(chan struct{}),
		p:      p,
		binary: binary,
	}
}

// Write takes one CopyData message of the source's COPY TO. PostgreSQL
// sends one message per row, so a binary copy counts rows as messages (the
// trailer's message too: the committed count is the target's, see
// Progress.tableDone); a text copy counts newlines, which end rows
// (one inside a value is written as \n).
func (pp *copyPipe) Write(b []byte) (int, error) {
	n := len(b)
	pp.bytes += int64(n)
	if pp.binary {
		pp.rows++
	} else {
		pp.rows += int64(bytes.Count(b, []byte{'\n'}))
	}
	for len(b) > 0 {
		if pp.cur == nil {
			select {
			case pp.cur = <-pp.free:
				pp.cur = pp.cur[:0]
			default:
				pp.cur = make([]byte, 0, copyChunk)
			}
		}
		k := copy(pp.cur[len(pp.cur):cap(pp.cur)], b)
		pp.cur, b = pp.cur[:len(pp.cur)+k], b[k:]
		if len(pp.cur) == cap(pp.cur) {
			if err := pp.send(); err != nil {
				return n - len(b), err
			}
		}
	}
	return n, nil
}

// send passes the current chunk to the reader.
func (pp *copyPipe) send() error {
	pp.tell()
	select {
	case pp.full <- pp.cur:
		pp.cur = nil
		return nil
	case <-pp.abort:
		return errCopyAborted
	}
}

// tell adds what passed since the last call to the copy's progress.
func (pp *copyPipe) tell() {
	if pp.p != nil {
		pp.p.add(pp.tc, pp.bytes-pp.told[0], pp.rows-pp.told[1])
	}
	pp.told = [2]int64{pp.bytes, pp.rows}
}

// closeWrite ends the data: with err nil, the reader reads the rest and
// then io.EOF; otherwise it gets err. Called once, by the writer.
func (pp *copyPipe) closeWrite(err error) {
	if err == nil && len(pp.cur) > 0 {
		err = pp.send()
	}
	pp.tell()
	pp.werr = err
	close(pp.full)
}

// closeRead tells the writer that nothing more will be read.
func (pp *copyPipe) closeRead() {
	pp.once.Do(func() { close(pp.abort) })
}

// Read fills b from the chunks, waiting for one when none is left.
func (pp *copyPipe) Read(b []byte) (int, error) {
	if len(pp.rd) == 0 {
		if pp.rdBuf != nil {
			select {
			case pp.free <- pp.rdBuf:
			default:
			}
			pp.rdBuf = nil
		}
		c, ok := <-pp.full
		if !ok {
			if pp.werr != nil {
				return 0, pp.werr
			}
			return 0, io.EOF
		}
		pp.rd, pp.rdBuf = c, c
	}
	n := copy(b, pp.rd)
	pp.rd = pp.rd[n:]
	return n, nil
}
