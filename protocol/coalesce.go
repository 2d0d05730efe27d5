package protocol

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// coalescePause is how long after a read that left the socket empty the
// next read waits before it touches the socket, counted from the end of
// that read (readPacer). Live, a message waits at most this long more.
//
// 12 ms since session 12, 4 ms before. Side by side with the built-in
// subscriber (walbench, PostgreSQL 18, walapply/builtin, medians of
// same-round pairs; BENCHMARKS.md, "The read pause, 4, 8 and 12 ms"):
// with a CPU-bound process per core (3 rounds), 12 ms against 4 ms took
// small from 2.11 to 1.28 (walsender CPU 3.36 to 2.21 s, segments 373,000
// to 216,000), bulk from 0.81 to 0.69 (963,000 segments to 114,000),
// pgbench from 0.60 to 0.52, mixed from 0.76 to 0.70, and toast, drains of
// under a second, from 1.46 to 1.57; without it (5 rounds, other work at
// nice 19) small from 1.54 to 1.33, toast from 1.40 to 1.26, pgbench and
// mixed within 2%, and bulk from 0.60 to 0.66, the one clear loss. A
// walsender slowed by contention fills the window more slowly, so a short
// pause reopens it before a queue has formed; 8 ms was between the two or
// worse than both.
const coalescePause = 12 * time.Millisecond

// coalesceRcvBuf is the receive buffer asked for on a loopback replication
// connection (SO_RCVBUF; Linux doubles it for its bookkeeping): small
// enough that the walsender fills the window within coalescePause, and
// not smaller. The kernel sizes the window it offers from the buffer
// scaled by the ratio of payload to bookkeeping of the segments it has
// received, and small segments carry several times their payload in
// bookkeeping: with 8 KiB the window shrank to a few hundred bytes and
// throttled the stream, and with 16 KiB streams stalled now and then for
// minutes on a window rounded down to nothing (TestStreamedKill,
// TestTorture under load). 32 KiB has served since session 5.
const coalesceRcvBuf = 32 << 10

// streamReadBuffer is the size of the buffer the replication stream is read
// into: one read takes all that waits on the socket (pgproto3's own buffer
// is 8 KiB, and would take several).
const streamReadBuffer = 256 << 10

// coalescingConn is a net.Conn whose reads, once pacing is on, are spaced
// by a readPacer.
//
// Read pacing on the replication connection.
//
// The walsender writes every message with a send() of its own. Over TCP, a
// send into an open receive window leaves at once as a segment of its own,
// and on loopback the sending process also does the receive side's work for
// it: in a drain of 200,000 one-row transactions, 62% of the walsender's CPU
// was send(2), 38% the transmission of segments (perf, PostgreSQL 18). A
// send into a closed window only appends to the socket's queue, and the
// queue leaves in window-sized segments when the reader makes room.
// PostgreSQL's own apply worker, slower than the walsender, keeps the window
// closed without trying. walapply, faster, kept it open, and so made the
// walsender — the slowest stage of such a drain — slower still.
//
// So while streaming, walapply reads the socket empty and then leaves it
// alone for coalescePause (12 ms), counted from the end of that read: time spent
// applying what was read counts, so a reader that is the bottleneck is
// never made to wait. During the pause the small loopback window
// (coalesceRcvBuf) fills and closes, and the walsender's further sends
// queue, to arrive in a few large segments at the next read. A read that
// leaves bytes on the socket (the queue flowed in while it ran) is followed
// by another at once. The pause outlives a read deadline that the caller
// set (the run loop's deadlines mean "nothing more at hand: commit the
// group"): the read that times out returns, and the next one waits for the
// rest of the pause.
//
// Why not the mechanism before it, a wait that ended as soon as a window's
// worth had arrived (SO_RCVLOWAT at 32 KiB): the window then reopened as
// soon as it closed, so nearly every send was a segment of its own. Side by
// side (walbench, walapply alone, PostgreSQL 18, machine shared with other
// work), the drain of small went from 303,000-474,000 segments and 4.0-4.5
// s of walsender CPU to 143,000-207,000 and 3.1-3.9 s, pgbench from
// 117,000-292,000 segments to 12,000-21,000; see BENCHMARKS.md, "The
// receive path, session 9". A 16 KiB buffer let through fewer still, but
// stalled (coalesceRcvBuf).
//
// Not yet right: small drains (one-row transactions) still take 1.3 times
// the built-in subscriber's time, with or without a neighbour. The
// walsender is then the bound, and serving walapply it spends 1.3 to 1.4
// times the CPU it spends serving builtin's slower apply worker
// (segments: 92,000 against 16,000 quiet), because every pause still
// begins with the window open. A larger buffer with TCP_WINDOW_CLAMP,
// pausing unless 8 or 16 KiB wait, and an adaptive clamp (which stalled)
// did not help (session 10); a clamp set on a connected socket does not
// bind on Linux 6.18, and set before connect a 4 or 16 KiB clamp brought
// more segments, not fewer. A pause that followed the walsender's rate
// (a quarter longer after a cycle of reads under 128 KiB, a quarter
// shorter over 256 KiB, 12 to 16 ms) won small and, with the neighbour,
// tied or won everything, but lost quiet toast, pgbench and bulk by 9 to
// 21% (session 13, BENCHMARKS.md, "The read pause that follows the
// rate"); below 12 ms it lost bulk by half in one round. Leaving the last
// 2 KiB of a read on the socket shuts the window for the whole pause (the
// tail holds its whole segment's memory): with the 12 ms pause it cut
// small's segments from about 93,000 to 5,000, but then every cycle moves
// one 64 KiB window, which capped quiet small at 1.14-1.40 of this path's
// time, and 1.12 with a pause that shortened after full cycles (with the
// neighbour 0.93, session 16); the window cannot be widened for the
// read alone, since Linux offers what rcv_ssthresh has reached, not the
// buffer (session 16, BENCHMARKS.md, "why the read reserve is dropped").
// Across a network, where the buffer is the kernel's, the pause is not
// measured.
//
// While it pauses, the goroutine sleeps in the kernel with the socket's
// SO_RCVLOWAT raised (socketSleep), so that the Go runtime's poller, whose
// epoll is edge-triggered, is not woken by every segment that arrives, and
// on loopback with the socket's ACKs delayed, which the walsender would
// otherwise process by the thousand. The
// commands before START_REPLICATION are never paced: each answer is read
// as it comes.
type coalescingConn struct {
	net.Conn
	// pacing is turned on when streaming starts (startPacing).
	pacing atomic.Bool
	// deadline is the read deadline last set, in Unix nanoseconds (0:
	// none). Atomic: pgconn's context watcher and the keepalive sender set
	// deadlines from other goroutines than the one reading.
	deadline atomic.Int64
	pacer    readPacer
	// sleep waits d without waking on arriving data (socketSleep);
	// waiting reports the bytes on the socket, or -1 if it cannot tell
	// (socketWaiting).
	sleep   func(d time.Duration)
	waiting func() int
	now     func() time.Time
}

func newCoalescingConn(c net.Conn, pause time.Duration) *coalescingConn {
	return &coalescingConn{Conn: c, pacer: readPacer{pause: pause}, sleep: socketSleep(c), waiting: socketWaiting(c), now: time.Now}
}

// startPacing turns pacing on: the connection now carries the stream.
func (c *coalescingConn) startPacing() { c.pacing.Store(true) }

func (c *coalescingConn) SetDeadline(t time.Time) error {
	c.noteDeadline(t)
	return c.Conn.SetDeadline(t)
}

func (c *coalescingConn) SetReadDeadline(t time.Time) error {
	c.noteDeadline(t)
	return c.Conn.SetReadDeadline(t)
}

func (c *coalescingConn) noteDeadline(t time.Time) {
	var ns int64
	if !t.IsZero() {
		ns = t.UnixNano()
	}
	c.deadline.Store(ns)
}

func (c *coalescingConn) Read(p []byte) (int, error) {
	if !c.pacing.Load() {
		return c.Conn.Read(p)
	}
	var deadline time.Time
	if ns := c.deadline.Load(); ns != 0 {
		deadline = time.Unix(0, ns)
	}
	if d := c.pacer.wait(c.now(), deadline); d > 0 {
		c.sleep(d)
	}
	n, err := c.Conn.Read(p)
	if err != nil {
		return n, err
	}
	emptied := n < len(p)
	if w := c.waiting(); w >= 0 {
		emptied = w == 0
	}
	c.pacer.read(c.now(), emptied)
	return n, err
}

// readPacer decides when a paced read may touch the socket. It is fed the
// outcome of every read that returned data and answers how long the next
// one waits; a read that failed (a deadline that passed) changes nothing.
type readPacer struct {
	pause time.Duration
	// emptied: the last read that returned data left the socket empty,
	// at last.
	emptied bool
	last    time.Time
}

// read records a read that returned data and ended at now; emptied tells
// whether it left the socket empty.
func (p *readPacer) read(now time.Time, emptied bool) {
	p.emptied, p.last = emptied, now
}

// wait is how long a read starting at now waits: until coalescePause after
// the last read that emptied the socket, but never past deadline (zero:
// none), and not at all after a read that left bytes behind.
func (p *readPacer) wait(now, deadline time.Time) time.Duration {
	if !p.emptied || p.pause <= 0 {
		return 0
	}
	until := p.last.Add(p.pause)
	if !deadline.IsZero() && deadline.Before(until) {
		until = deadline
	}
	return max(until.Sub(now), 0)
}

// coalescing wraps the connections that dial opens (pgconn's dialer, with
// the connection string's connect_timeout) in a coalescingConn, handed to
// opened as well, and gives loopback TCP connections the small receive
// buffer that lets the window close. Across a network the window must
// cover the bandwidth-delay product (a window of some tens of KiB at a
// 10 ms round trip allows a few MB/s; an estimate, not measured) and
// segments cost the sender less, so there the kernel's autotuning stays.
func coalescing(dial pgconn.DialFunc, pause time.Duration, opened func(*coalescingConn)) pgconn.DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if tc, ok := c.(*net.TCPConn); ok && isLoopback(tc.RemoteAddr()) {
			if err := tc.SetReadBuffer(coalesceRcvBuf); err != nil {
				c.Close()
				return nil, fmt.Errorf("protocol: setting the receive buffer of the replication socket: %w", err)
			}
		}
		cc := newCoalescingConn(c, pause)
		if opened != nil {
			opened(cc)
		}
		return cc, nil
	}
}

// isLoopback reports whether addr is a TCP address on the loopback
// interface (127.0.0.0/8, ::1).
func isLoopback(addr net.Addr) bool {
	a, ok := addr.(*net.TCPAddr)
	return ok && a.IP.IsLoopback()
}
