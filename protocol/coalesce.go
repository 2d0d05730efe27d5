package protocol

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// coalescePause is the longest pause after a read that emptied the socket.
// Live, a message waits at most this long more.
const coalescePause = time.Millisecond

// coalesceRcvBuf is the receive buffer asked for on a TCP replication
// connection (SO_RCVBUF; Linux doubles it for its bookkeeping): small enough
// that a walsender sending a backlog of small transactions fills the window
// within coalescePause (with 48 and 64 KiB it often did not, on
// PostgreSQL 18), large enough that it rarely waits for walapply.
const coalesceRcvBuf = 32 << 10

// coalesceEnough is what must be waiting on the socket, after a read that
// emptied it, for the next read not to pause: about a window, which only a
// walsender that is ahead has queued; one that is behind trickles in a
// message at a time. Bars of 8, 16 and 32 KiB did about as well as each
// other in a few drains each (a backlog of one-row transactions went in
// 26,000-171,000 segments, against 5,000-273,000 without the bar and the
// small buffer); the whole window is kept because only a walsender that is
// ahead can have that much queued.
const coalesceEnough = 32 << 10

// coalescingConn is a net.Conn whose reads pause after one that found the
// socket empty.
//
// Read coalescing on the replication connection.
//
// The walsender writes every message with a send() of its own. Over TCP, a
// send into an open receive window leaves at once as a segment of its own,
// and on loopback the sending process also does the receive side's work for
// it. A send into a closed window only appends to the last queued segment,
// and the queue leaves in window-sized segments when the reader makes room.
// On a backlog of 200,000 one-row transactions on PostgreSQL 15, PostgreSQL's
// own apply worker, slower than the walsender, kept the window closed: 1,174
// segments, 1.03 s of source CPU. walapply, faster, kept it open: 157,566
// segments, 1.60 s (one drain each).
//
// So walapply closes the window on purpose when the walsender is behind: on
// a loopback connection the socket's receive buffer is small
// (coalesceRcvBuf), and after a read that emptied the socket, the next read
// waits briefly (at most coalescePause) for about a window's worth
// (coalesceEnough) to be waiting. A walsender that is ahead has that much
// queued at once, so a fast stream is not paused. (A reader that always
// paused was slower on backlogs that keep the target busy, pgbench and
// mixed on PostgreSQL 18; with less than a window as the bar, or reading
// into a 64 KiB buffer of its own, the window stayed open for much of a
// backlog of small transactions.)
//
// On Linux the wait is spent in the kernel (awaitWindow): the socket's
// SO_RCVLOWAT is raised to coalesceEnough and one ppoll(2) waits for that
// much or for the pause to end, so the pause also ends as soon as the
// window is full. It used to be a SIOCINQ look and a time.Sleep, and while
// the goroutine slept on a Go timer the runtime's poller thread was woken
// by every segment that arrived (its epoll is edge-triggered and nobody was
// reading); below the low-water mark the kernel wakes nobody. In one drain
// of 200,000 one-row transactions on PostgreSQL 18 (perf stat, load
// average 12-16 from other work): 222,000 epoll_pwait and 262,000 context
// switches before, 10,000 and 35,000 after; with a CPU-bound neighbour per
// core 16,000 and 27,000 before, 4,500 and 10,000 after. In five
// alternating rounds of that drain, walapply's CPU went from 1.85 to 0.84 s
// without the neighbours and from 0.69 to 0.47 s with them (medians), and
// the drains from 6.3 to 5.0 s and from 7.9 to 6.4 s.
//
// Taking the pause out, or a large or autotuned receive buffer instead of
// the small one, was worse with and without the neighbours (issue 17: the
// same drain took the walsender up to 2.1 s of CPU instead of 0.7-1.1 s,
// walapply up to 3.6 s, and up to 9.5 s against 3.3-6.1 s).
//
// The pause never passes the read deadline that the caller set (the run
// loop's deadlines mean "nothing more at hand: commit the group"), and a
// read that filled the caller's buffer is followed by another at once.
type coalescingConn struct {
	net.Conn
	pause time.Duration
	// deadline is the read deadline last set, in Unix nanoseconds (0:
	// none). Atomic: pgconn's context watcher and the keepalive sender set
	// deadlines from other goroutines than the one reading.
	deadline atomic.Int64
	emptied  bool // the last read returned less than asked
	// await waits at most d for coalesceEnough bytes to be waiting on the
	// socket (socketAwait).
	await func(d time.Duration)
	now   func() time.Time
}

func newCoalescingConn(c net.Conn, pause time.Duration) *coalescingConn {
	return &coalescingConn{Conn: c, pause: pause, await: socketAwait(c), now: time.Now}
}

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
	if c.emptied && c.pause > 0 {
		d := c.pause
		if ns := c.deadline.Load(); ns != 0 {
			d = min(d, time.Unix(0, ns).Sub(c.now()))
		}
		if d > 0 {
			c.await(d)
		}
	}
	n, err := c.Conn.Read(p)
	c.emptied = err == nil && n < len(p)
	return n, err
}

// sleepUnlessEnough is the wait where the kernel cannot do it (not a TCP
// socket, not Linux): it asks how much is waiting (waiting returns -1 if
// it cannot tell) and sleeps for the whole pause unless a window's worth is.
func sleepUnlessEnough(waiting func() int, sleep func(time.Duration)) func(time.Duration) {
	return func(d time.Duration) {
		if waiting() < coalesceEnough {
			sleep(d)
		}
	}
}

// coalescing wraps the connections that dial opens (pgconn's dialer, with
// the connection string's connect_timeout) in a coalescingConn, and gives
// loopback TCP connections the small receive buffer that lets the window
// close. Across a network the window must cover the bandwidth-delay
// product (a window of some tens of KiB at a 10 ms round trip allows a few
// MB/s; an estimate, not measured) and segments cost the sender less, so
// there the kernel's autotuning stays.
func coalescing(dial pgconn.DialFunc, pause time.Duration) pgconn.DialFunc {
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
		return newCoalescingConn(c, pause), nil
	}
}

// isLoopback reports whether addr is a TCP address on the loopback
// interface (127.0.0.0/8, ::1).
func isLoopback(addr net.Addr) bool {
	a, ok := addr.(*net.TCPAddr)
	return ok && a.IP.IsLoopback()
}
