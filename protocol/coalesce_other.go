//go:build !linux

package protocol

import (
	"net"
	"time"
)

// socketAwait cannot ask the socket on this system: every read that
// follows one that emptied the socket sleeps for the whole pause.
func socketAwait(net.Conn) func(time.Duration) {
	return sleepUnlessEnough(func() int { return -1 }, time.Sleep)
}
