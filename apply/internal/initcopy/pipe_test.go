package initcopy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/testenv"
)

// TestCopyPipeChunks: rows written one at a time come out in reads of
// full chunks, byte for byte, with rows and bytes counted; a huge row
// spans chunks.
func TestCopyPipeChunks(t *testing.T) {
	pipe := newCopyPipe(nil, false)
	var want bytes.Buffer
	go func() {
		for i := range 10000 {
			row := fmt.Appendf(nil, "%d\tsome text of row %d\n", i, i)
			want.Write(row)
			if _, err := pipe.Write(row); err != nil {
				pipe.closeWrite(err)
				return
			}
		}
		huge := append(bytes.Repeat([]byte{'x'}, 3*copyChunk), '\n')
		want.Write(huge)
		_, err := pipe.Write(huge)
		pipe.closeWrite(err)
	}()
	var got bytes.Buffer
	reads := 0
	buf := make([]byte, copyChunk) // CopyFrom's read size
	for {
		n, err := pipe.Read(buf)
		if n > 0 {
			reads++
			got.Write(buf[:n])
			if n != copyChunk && err == nil {
				// Only the last read may be short.
				defer func(n int) {
					if got.Len() != want.Len() {
						t.Errorf("a short read of %d bytes before the end", n)
					}
				}(n)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("read %d bytes, want the %d written, identical", got.Len(), want.Len())
	}
	if max := want.Len()/copyChunk + 1; reads > max {
		t.Errorf("%d reads for %d bytes, want at most %d", reads, want.Len(), max)
	}
	if pipe.rows != 10001 || pipe.bytes != int64(want.Len()) {
		t.Errorf("counted %d rows, %d bytes; want 10001, %d", pipe.rows, pipe.bytes, want.Len())
	}
}

// TestCopyPipeAbort: a reader that gives up ends the writer, and a
// writer's error reaches the reader.
func TestCopyPipeAbort(t *testing.T) {
	pipe := newCopyPipe(nil, true)
	done := make(chan error, 1)
	go func() {
		row := bytes.Repeat([]byte{'y'}, 1000)
		for {
			if _, err := pipe.Write(row); err != nil {
				done <- err
				return
			}
		}
	}()
	pipe.closeRead()
	select {
	case err := <-done:
		if !errors.Is(err, errCopyAborted) {
			t.Errorf("writer: %v, want errCopyAborted", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the writer did not stop after closeRead")
	}

	pipe = newCopyPipe(nil, true)
	boom := errors.New("boom")
	go func() {
		_, _ = pipe.Write([]byte("partial"))
		pipe.closeWrite(boom)
	}()
	if _, err := io.ReadAll(pipe); !errors.Is(err, boom) {
		t.Errorf("reader: %v, want the writer's error", err)
	}
}

// countingConn counts the writes and reads made on a connection.
type countingConn struct {
	net.Conn
	writes, reads *atomic.Int64
}

func (c countingConn) Write(b []byte) (int, error) { c.writes.Add(1); return c.Conn.Write(b) }
func (c countingConn) Read(b []byte) (int, error)  { c.reads.Add(1); return c.Conn.Read(b) }

// TestCopyMovesChunks copies a 10,000-row table through moveRows between
// connections that count their write(2)s and read(2)s: the target must get
// the rows in a few large messages, not one per row (issue 17: 5.3 million
// writes for 5.3 million rows), in text and binary format.
func TestCopyMovesChunks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := testenv.NewCluster(t, testenv.Options{})
	const rows = 10000
	if err := c.Exec(ctx, `CREATE TABLE src (id int PRIMARY KEY, v text, at timestamptz);
		INSERT INTO src SELECT g, md5(g::text), '2024-01-01'::timestamptz + g * interval '1 s' FROM generate_series(1, 10000) g;
		CREATE TABLE dst (LIKE src)`); err != nil {
		t.Fatal(err)
	}
	connect := func(writes, reads *atomic.Int64, source bool) *pgconn.PgConn {
		pc, err := pgx.ParseConfig(c.ConnString("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		if source {
			bufferSourceReads(pc) // as the copy workers' source connections
		}
		cfg := &pc.Config
		dial := cfg.DialFunc
		cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return countingConn{conn, writes, reads}, nil
		}
		conn, err := pgconn.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(context.Background()) })
		return conn
	}
	for _, binary := range []bool{false, true} {
		t.Run(copyFormatName(binary), func(t *testing.T) {
			var srcW, srcR, tgtW, tgtR atomic.Int64
			src, tgt := connect(&srcW, &srcR, true), connect(&tgtW, &tgtR, false)
			if _, err := tgt.Exec(ctx, "TRUNCATE dst").ReadAll(); err != nil {
				t.Fatal(err)
			}
			srcW.Store(0)
			srcR.Store(0)
			tgtW.Store(0)
			tgtR.Store(0)
			out, in := "COPY (SELECT * FROM src) TO STDOUT", "COPY dst FROM STDIN"
			if binary {
				out, in = out+" WITH (FORMAT binary)", in+" WITH (FORMAT binary)"
			}
			pipe := newCopyPipe(nil, binary)
			tag, srcErr, tgtErr := moveRows(ctx, src, tgt, out, in, pipe)
			if srcErr != nil || tgtErr != nil {
				t.Fatalf("source: %v, target: %v", srcErr, tgtErr)
			}
			if tag.RowsAffected() != rows {
				t.Fatalf("copied %d rows, want %d", tag.RowsAffected(), rows)
			}
			res, err := tgt.Exec(ctx, "SELECT count(*) FROM src NATURAL JOIN dst").ReadAll()
			if err != nil || len(res) != 1 || len(res[0].Rows) != 1 || string(res[0].Rows[0][0]) != fmt.Sprint(rows) {
				t.Fatalf("rows identical on both sides: %v (%v), want %d", res, err, rows)
			}
			t.Logf("%d bytes: target connection %d writes, %d reads; source connection %d writes, %d reads",
				pipe.bytes, tgtW.Load(), tgtR.Load(), srcW.Load(), srcR.Load())
			// A write per 64 KiB chunk, the query and CopyDone: about 10
			// here, where one per row makes 10,000.
			if w, limit := tgtW.Load(), pipe.bytes/copyChunk+5; w > limit {
				t.Errorf("%d writes on the target connection for %d rows (%d bytes), want at most %d", w, rows, pipe.bytes, limit)
			}
		})
	}
}

// TestCopyMoveRowsErrors: a target that fails mid-copy ends the source
// side, and a source that fails mid-copy fails the target's COPY, each
// with its own error and without hanging.
func TestCopyMoveRowsErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := testenv.NewCluster(t, testenv.Options{})
	if err := c.Exec(ctx, `CREATE TABLE e_src AS SELECT g AS id, repeat('x', 200) AS pad FROM generate_series(1, 100000) g;
		CREATE TABLE e_dst (id int CHECK (id <> 50000), pad text)`); err != nil {
		t.Fatal(err)
	}
	connect := func() *pgconn.PgConn {
		conn, err := pgconn.Connect(ctx, c.ConnString("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(context.Background()) })
		return conn
	}
	_, srcErr, tgtErr := moveRows(ctx, connect(), connect(), "COPY e_src TO STDOUT", "COPY e_dst FROM STDIN", newCopyPipe(nil, false))
	var pe *pgconn.PgError
	if !errors.As(tgtErr, &pe) || pe.Code != "23514" {
		t.Errorf("target failing: target error %v, want the check violation", tgtErr)
	}
	if srcErr != nil && !errors.Is(srcErr, errCopyAborted) {
		t.Errorf("target failing: source error %v, want none or errCopyAborted", srcErr)
	}

	_, srcErr, tgtErr = moveRows(ctx, connect(), connect(), "COPY (SELECT 1 / (id - 60000), pad FROM e_src) TO STDOUT",
		"COPY e_dst FROM STDIN", newCopyPipe(nil, false))
	if !errors.As(srcErr, &pe) || pe.Code != "22012" {
		t.Errorf("source failing: source error %v, want division by zero", srcErr)
	}
	if tgtErr == nil {
		t.Error("source failing: the target's COPY succeeded")
	}
}
