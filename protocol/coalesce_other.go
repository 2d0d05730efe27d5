//go:build !linux

package protocol

import (
	"net"
	"time"
)

// socketSleep is a plain sleep on this system.
func socketSleep(net.Conn) func(time.Duration) { return time.Sleep }

// socketWaiting cannot tell how much waits on this system: a read that
// returns less than it asked for counts as one that emptied the socket.
func socketWaiting(net.Conn) func() int { return func() int { return -1 } }
