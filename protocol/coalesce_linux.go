package protocol

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

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
