//go:build !linux

package protocol

import (
	"net"
	"time"
)

// socketAwait cannot ask the socket on this system: every read that
// follows one that emptied the socket sleeps for the whole pause.
func socketAwait(c net.Conn) func(time.Duration) {
	return sleepUnlessEnough(socketWaiting(c), time.Sleep)
}

// socketWaiting cannot tell how much waits on this system.
func socketWaiting(net.Conn) func() int { return func() int { return -1 } }
