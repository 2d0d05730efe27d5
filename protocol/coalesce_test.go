package protocol

import (
	"net"
	"testing"
	"time"
)

// scriptedConn answers reads with the given sizes, filling what is asked
// when the size is -1.
type scriptedConn struct {
	net.Conn
	sizes []int
}

func (c *scriptedConn) Read(p []byte) (int, error) {
	n := c.sizes[0]
	c.sizes = c.sizes[1:]
	if n < 0 {
		n = len(p)
	}
	return n, nil
}

func (c *scriptedConn) SetReadDeadline(time.Time) error { return nil }

func TestCoalescingConnPauses(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name     string
		sizes    []int         // what each read returns (-1: all asked)
		deadline time.Duration // from now; 0: none
		want     []time.Duration
	}{
		{"first read never pauses", []int{10}, 0, []time.Duration{}},
		{"after an emptied socket", []int{10, 10, 10}, 0, []time.Duration{time.Millisecond, time.Millisecond}},
		{"not after a full buffer", []int{-1, 10, -1, -1}, 0, []time.Duration{time.Millisecond}},
		{"cut at the deadline", []int{10, 10}, 300 * time.Microsecond, []time.Duration{300 * time.Microsecond}},
		{"none past the deadline", []int{10, 10}, -time.Millisecond, []time.Duration{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCoalescingConn(&scriptedConn{sizes: tc.sizes}, time.Millisecond)
			slept := []time.Duration{}
			c.sleep = func(d time.Duration) { slept = append(slept, d) }
			c.now = func() time.Time { return now }
			if tc.deadline != 0 {
				if err := c.SetReadDeadline(now.Add(tc.deadline)); err != nil {
					t.Fatal(err)
				}
			}
			buf := make([]byte, 64)
			for range tc.sizes {
				if _, err := c.Read(buf); err != nil {
					t.Fatal(err)
				}
			}
			if len(slept) != len(tc.want) {
				t.Fatalf("slept %v, want %v", slept, tc.want)
			}
			for i := range slept {
				if slept[i] != tc.want[i] {
					t.Fatalf("slept %v, want %v", slept, tc.want)
				}
			}
		})
	}
}
