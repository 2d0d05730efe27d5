package protocol

import (
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// socketSleep returns how a coalescingConn on c pauses: on a TCP socket, a
// nanosleep(2) with the socket's SO_RCVLOWAT raised meanwhile, so that
// segments arriving during the pause wake nobody (a full loopback buffer
// wakes the poller once: Linux caps the mark at half the buffer). The mark
// is the loopback buffer's size, not more: on a socket whose buffer the
// kernel tunes, Linux grows the buffer to fit the mark and clamps the
// window to it, for good. The mark goes back to 1 before it returns: the Go runtime's poller waits on the
// same socket for any byte. A failing setsockopt only lets the poller wake.
// Elsewhere (a Unix socket ignores SO_RCVLOWAT), a plain sleep.
//
// On loopback the pause also delays the socket's ACKs (TCP_QUICKACK off,
// which Linux undoes by itself when its delayed-ACK timer fires, so it is
// set again at every pause). An ACK opens no window: only a read frees
// room, and a read sends its own ACK with the window. But a receiver in
// quick-ACK mode answers every few small segments at once, and on
// loopback the sending process does that work: the walsender's softirq
// builds the ACK on walapply's socket and takes it in on its own. Side by
// side, 3 rounds each (walbench, PostgreSQL 18, new/old of same-round
// pairs), with a CPU-bound process per core: toast 0.80, small 0.91,
// mixed 0.94, pgbench 1.00, bulk 1.11 (not explained; perhaps data not
// yet acknowledged holds the walsender's send buffer longer); quiet:
// toast 0.88, bulk 0.90, mixed 0.99, pgbench 1.02, small 1.04 (session
// 14, BENCHMARKS.md, "Delayed ACKs during the read pause"). Across a network the ACKs clock the sender's congestion window,
// so there the kernel's choice stays.
func socketSleep(c net.Conn) func(time.Duration) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return time.Sleep
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return time.Sleep
	}
	delayACKs := isLoopback(tc.RemoteAddr())
	return func(d time.Duration) {
		_ = raw.Control(func(fd uintptr) {
			_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVLOWAT, coalesceRcvBuf)
			if delayACKs {
				_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_QUICKACK, 0)
			}
			ts := unix.NsecToTimespec(d.Nanoseconds())
			for unix.Nanosleep(&ts, &ts) == unix.EINTR {
			}
			_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVLOWAT, 1)
		})
	}
}

// socketWaiting returns a function that reports the bytes waiting in c's
// receive queue (SIOCINQ), or -1 if c has no socket to ask.
func socketWaiting(c net.Conn) func() int {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return func() int { return -1 }
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return func() int { return -1 }
	}
	return func() int {
		n := -1
		if err := raw.Control(func(fd uintptr) {
			if v, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ); err == nil {
				n = v
			}
		}); err != nil {
			return -1
		}
		return n
	}
}
