package faultproxy

import (
	"encoding/binary"
	"fmt"
)

// XLogDataHeaderSize is the size of the XLogData header that precedes the
// pgoutput message in a CopyData payload: 'w', Int64 WAL start, Int64
// server WAL end, Int64 send time.
const XLogDataHeaderSize = 25

// Action is what Corrupt does to the message it picks.
type Action int

const (
	// FlipByte XORs Mask into the byte at Offset.
	FlipByte Action = iota + 1
	// Truncate keeps the bytes before Offset and drops the rest, rewriting
	// the CopyData length so that the framing stays valid: the client
	// receives a well-framed but short message.
	Truncate
	// Tear forwards the CopyData header, which still announces the whole
	// message, and the payload bytes before Offset, then resets the
	// connection: the client sees a message cut off in the middle.
	Tear
)

func (a Action) String() string {
	switch a {
	case FlipByte:
		return "flip"
	case Truncate:
		return "truncate"
	case Tear:
		return "tear"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Corruption says which XLogData message to damage and how.
//
// Offset counts from the first byte of the pgoutput message (its type
// byte). Negative offsets, down to -XLogDataHeaderSize, reach into the
// XLogData header: -25 is its 'w', -24 to -17 the WAL start. A message that
// does not extend past Offset (has no byte at Offset to flip or to drop)
// does not match.
type Corruption struct {
	// Match picks the message from its pgoutput bytes (which it must not
	// keep or modify); nil picks the first XLogData message.
	Match  func(msg []byte) bool
	Action Action
	Offset int
	// Mask is XORed into the byte by FlipByte; 0 means 0xff.
	Mask byte
}

// Damage reports what Corrupt did.
type Damage struct {
	Action Action
	Offset int
	// WALStart is the WAL start of the damaged XLogData message, as the
	// server sent it.
	WALStart uint64
	// Original is the pgoutput message as the server sent it; Sent is what
	// the client was given (for Tear, up to where it was cut).
	Original []byte
	Sent     []byte
}

// armed is a Corruption waiting for its message; done receives the one
// Damage it causes.
type armed struct {
	c    Corruption
	done chan Damage
}

func (c *Corruption) validate() error {
	switch c.Action {
	case FlipByte, Truncate, Tear:
	default:
		return fmt.Errorf("faultproxy: unknown corruption action %v", c.Action)
	}
	if c.Offset < -XLogDataHeaderSize {
		return fmt.Errorf("faultproxy: corruption offset %d is before the XLogData header", c.Offset)
	}
	return nil
}

// fits reports whether an XLogData payload of n bytes (header included) is
// long enough for c.
func (c *Corruption) fits(n int) bool {
	return XLogDataHeaderSize+c.Offset < n
}

// matches reports whether the CopyData payload p is the XLogData message c
// is waiting for.
func (c *Corruption) matches(p []byte) bool {
	if len(p) < XLogDataHeaderSize || p[0] != 'w' || !c.fits(len(p)) {
		return false
	}
	return c.Match == nil || c.Match(p[XLogDataHeaderSize:])
}

// apply damages the CopyData payload p (XLogData, matched) in place and
// returns what to send: the payload, and for Tear how many of its bytes to
// send before resetting.
func (c *Corruption) apply(p []byte) (out []byte, d Damage) {
	d = Damage{Action: c.Action, Offset: c.Offset, WALStart: binary.BigEndian.Uint64(p[1:9]),
		Original: append([]byte(nil), p[XLogDataHeaderSize:]...)}
	at := XLogDataHeaderSize + c.Offset
	out = p
	switch c.Action {
	case FlipByte:
		mask := c.Mask
		if mask == 0 {
			mask = 0xff
		}
		p[at] ^= mask
	case Truncate, Tear:
		out = p[:at]
	}
	if len(out) > XLogDataHeaderSize {
		d.Sent = append([]byte(nil), out[XLogDataHeaderSize:]...)
	} else {
		d.Sent = []byte{}
	}
	return out, d
}
