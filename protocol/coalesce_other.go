//go:build !linux

package protocol

import "net"

// socketWaiting cannot ask the socket on this system: every read that
// follows one that emptied the socket pauses.
func socketWaiting(net.Conn) func() int { return func() int { return -1 } }
