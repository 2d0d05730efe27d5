package protocol

import (
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// socketAwait returns how a coalescingConn on c waits: awaitWindow on a
// TCP socket, where SO_RCVLOWAT holds back poll(2) until that much waits;
// elsewhere (a Unix socket ignores SO_RCVLOWAT in poll) a look at the
// receive queue and a sleep.
func socketAwait(c net.Conn) func(time.Duration) {
	if tc, ok := c.(*net.TCPConn); ok {
		if raw, err := tc.SyscallConn(); err == nil {
			return func(d time.Duration) { awaitWindow(raw, d) }
		}
	}
	return sleepUnlessEnough(socketWaiting(c), time.Sleep)
}

// awaitWindow waits at most d, in one ppoll(2), for coalesceEnough bytes
// to be waiting on the socket (at once if they already are). The low-water
// mark goes back to 1 before it returns: the Go runtime's poller waits on
// the same socket for any byte. A failing call only makes the pause end
// early. Linux caps SO_RCVLOWAT at half the receive buffer, which the
// small loopback buffer (coalesceRcvBuf, doubled) allows in full.
func awaitWindow(raw syscall.RawConn, d time.Duration) {
	_ = raw.Control(func(fd uintptr) {
		if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVLOWAT, coalesceEnough) != nil {
			return
		}
		ts := unix.NsecToTimespec(d.Nanoseconds())
		_, _ = unix.Ppoll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, &ts, nil)
		_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVLOWAT, 1)
	})
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
