package protocol

import (
	"context"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"
)

// scriptedConn answers reads as its script says: the bytes a read returns
// (-1: all asked; 0: a timeout), how much it leaves waiting on the socket,
// and how long the read takes on the caller's clock.
type scriptedConn struct {
	net.Conn
	steps []readStep
	clock *time.Time
	left  int // what the last read left waiting
}

type readStep struct {
	n, left int
	took    time.Duration
}

type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

func (c *scriptedConn) Read(p []byte) (int, error) {
	st := c.steps[0]
	c.steps = c.steps[1:]
	*c.clock = c.clock.Add(st.took)
	c.left = st.left
	switch st.n {
	case 0:
		return 0, timeoutError{}
	case -1:
		return len(p), nil
	}
	return st.n, nil
}

func (c *scriptedConn) SetReadDeadline(time.Time) error { return nil }
func (c *scriptedConn) SetDeadline(time.Time) error     { return nil }

// The pacer's decisions, read by read: after a read that leaves the socket
// empty the next waits until the pause has passed since that read ended
// (time spent meanwhile counts), never past the caller's deadline, and a
// read that times out leaves the pause running.
func TestCoalescingConnPaces(t *testing.T) {
	const ms = time.Millisecond
	start := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name     string
		steps    []readStep
		between  time.Duration // caller's time between reads (applying)
		deadline time.Duration // from start; 0: none
		want     []time.Duration
	}{
		{"first read never waits", []readStep{{10, 0, 0}}, 0, 0, []time.Duration{}},
		{"after the socket was emptied", []readStep{{10, 0, 0}, {10, 0, 0}, {10, 0, 0}}, 0, 0, []time.Duration{2 * ms, 2 * ms}},
		{"not while bytes are left", []readStep{{10, 5, 0}, {10, 5, 0}, {10, 0, 0}, {10, 0, 0}}, 0, 0, []time.Duration{2 * ms}},
		{"a full read that emptied it waits", []readStep{{-1, 0, 0}, {10, 0, 0}}, 0, 0, []time.Duration{2 * ms}},
		{"applying counts toward the pause", []readStep{{10, 0, 0}, {10, 0, 0}}, 1500 * time.Microsecond, 0, []time.Duration{500 * time.Microsecond}},
		{"no wait once the pause has passed", []readStep{{10, 0, 0}, {10, 0, 0}}, 3 * ms, 0, []time.Duration{}},
		{"a read blocked long counts from its end", []readStep{{10, 0, time.Hour}, {10, 0, 0}}, 0, 0, []time.Duration{2 * ms}},
		{"cut at the deadline", []readStep{{10, 0, 0}, {10, 0, 0}}, 0, 300 * time.Microsecond, []time.Duration{300 * time.Microsecond}},
		{"none past the deadline", []readStep{{10, 0, 0}, {10, 0, 0}}, 0, -ms, []time.Duration{}},
		{"the pause outlives a timeout", []readStep{{10, 0, 0}, {0, 0, 0}, {10, 0, 0}}, 0, 500 * time.Microsecond, []time.Duration{500 * time.Microsecond, 1500 * time.Microsecond}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			now := start
			sc := &scriptedConn{steps: tc.steps, clock: &now}
			c := newCoalescingConn(sc, 2*ms) // the cases are written for a 2 ms pause
			c.startPacing()
			slept := []time.Duration{}
			c.sleep = func(d time.Duration) { slept = append(slept, d); now = now.Add(d) }
			c.waiting = func() int { return sc.left }
			c.now = func() time.Time { return now }
			if tc.deadline != 0 {
				if err := c.SetReadDeadline(start.Add(tc.deadline)); err != nil {
					t.Fatal(err)
				}
			}
			buf := make([]byte, 64)
			for i, st := range tc.steps {
				if i > 0 {
					now = now.Add(tc.between)
				}
				if _, err := c.Read(buf); (err != nil) != (st.n == 0) {
					t.Fatalf("read %d: %v", i, err)
				}
				if i == 1 && st.n == 0 {
					// The run loop commits its group, then reads on with a
					// later deadline.
					if err := c.SetReadDeadline(time.Time{}); err != nil {
						t.Fatal(err)
					}
				}
			}
			if fmt.Sprint(slept) != fmt.Sprint(tc.want) {
				t.Fatalf("slept %v, want %v", slept, tc.want)
			}
		})
	}
}

// Where the socket cannot say what waits, a read that returns less than it
// asked for counts as one that emptied it; before streaming starts nothing
// is paced.
func TestCoalescingConnFallbacks(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		pacing bool
		steps  []readStep
		want   int
	}{
		{"short reads", true, []readStep{{10, 0, 0}, {10, 0, 0}}, 1},
		{"full reads", true, []readStep{{-1, 0, 0}, {-1, 0, 0}}, 0},
		{"commands", false, []readStep{{10, 0, 0}, {10, 0, 0}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCoalescingConn(&scriptedConn{steps: tc.steps, clock: &now}, coalescePause)
			if tc.pacing {
				c.startPacing()
			}
			slept := 0
			c.sleep = func(time.Duration) { slept++ }
			c.waiting = func() int { return -1 }
			c.now = func() time.Time { return now }
			buf := make([]byte, 64)
			for range tc.steps {
				if _, err := c.Read(buf); err != nil {
					t.Fatal(err)
				}
			}
			if slept != tc.want {
				t.Fatalf("slept %d times, want %d", slept, tc.want)
			}
		})
	}
}

// On a real socket: the dialer gives a TCP replication connection its small
// receive buffer and hands the connection over, the connection can tell how
// much waits on it, and its pause is not cut short by bytes arriving,
// leaving the low-water mark at 1 for the Go runtime's poller.
func TestCoalescingConnOnSocket(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	var d net.Dialer
	var opened *coalescingConn
	conn, err := coalescing(d.DialContext, coalescePause, func(c *coalescingConn) { opened = c })(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	server, ok := <-accepted
	if !ok {
		t.Fatal("no connection accepted")
	}
	defer server.Close()
	c := conn.(*coalescingConn)
	if opened != c {
		t.Fatal("the dialer did not hand over the connection it opened")
	}
	tc, ok := c.Conn.(*net.TCPConn)
	if !ok {
		t.Fatalf("dialed %T, want a TCP connection inside", c.Conn)
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	sockopt := func(opt int) int {
		var v int
		var serr error
		if err := raw.Control(func(fd uintptr) { v, serr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, opt) }); err != nil || serr != nil {
			t.Fatal(err, serr)
		}
		return v
	}
	// Linux doubles the size asked for, for its bookkeeping.
	if size := sockopt(syscall.SO_RCVBUF); size != 2*coalesceRcvBuf {
		t.Errorf("SO_RCVBUF %d, want %d", size, 2*coalesceRcvBuf)
	}
	if n := c.waiting(); n != 0 {
		t.Errorf("%d bytes waiting before any was sent", n)
	}
	if _, err := server.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); c.waiting() != 5; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes waiting, want the 5 sent", c.waiting())
		}
	}
	buf := make([]byte, 16)
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("read %q, %v; want hello", buf[:n], err)
	}
	if n := c.waiting(); n != 0 {
		t.Errorf("%d bytes waiting after all was read", n)
	}

	// A pause on loopback turns quick ACKs off (socketSleep).
	c.sleep(time.Millisecond)
	var quick int
	var qerr error
	if err := raw.Control(func(fd uintptr) {
		quick, qerr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK)
	}); err != nil || qerr != nil {
		t.Fatal(err, qerr)
	}
	if quick != 0 {
		t.Errorf("TCP_QUICKACK %d after a pause on loopback, want 0 (delayed ACKs)", quick)
	}

	// A pause of 300 ms with the buffer filled halfway through: it lasts
	// its whole length (a sleep that ended at the bytes would take about
	// 150 ms) and restores the mark.
	go func() {
		time.Sleep(150 * time.Millisecond)
		_, _ = server.Write(make([]byte, 3*coalesceRcvBuf))
	}()
	begin := time.Now()
	c.sleep(300 * time.Millisecond)
	if took := time.Since(begin); took < 300*time.Millisecond {
		t.Errorf("the pause ended after %v, want all of 300ms", took)
	}
	if lowat := sockopt(syscall.SO_RCVLOWAT); lowat != 1 {
		t.Errorf("SO_RCVLOWAT %d after the pause, want 1", lowat)
	}
}

// Only loopback connections get the small receive buffer: across a network
// it would cap the throughput at a window per round trip.
func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:5432":     true,
		"127.8.9.10:5432":    true,
		"[::1]:5432":         true,
		"10.0.0.7:5432":      false,
		"192.168.1.20:5432":  false,
		"[2001:db8::1]:5432": false,
	} {
		a, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := isLoopback(a); got != want {
			t.Errorf("isLoopback(%s) = %v, want %v", addr, got, want)
		}
	}
	if isLoopback(&net.UnixAddr{Name: "/tmp/.s.PGSQL.5432", Net: "unix"}) {
		t.Error("a Unix socket counted as TCP loopback")
	}
}

// TestCoalescingConnDeadlineRace: pgconn's context watcher and the
// keepalive sender set deadlines from goroutines other than the reading
// one; the deadline the pause reads must be safe to share (run with
// -race: `make test-race`).
func TestCoalescingConnDeadlineRace(t *testing.T) {
	now := time.Now()
	c := newCoalescingConn(&scriptedConn{steps: make([]readStep, 1000), clock: &now}, time.Microsecond)
	for i := range c.Conn.(*scriptedConn).steps {
		c.Conn.(*scriptedConn).steps[i].n = 10
	}
	c.startPacing()
	c.sleep = func(time.Duration) {}
	c.waiting = func() int { return 0 }
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 1000 {
			_ = c.SetDeadline(time.Now().Add(time.Duration(i) * time.Millisecond))
		}
	}()
	buf := make([]byte, 64)
	for range 1000 {
		if _, err := c.Read(buf); err != nil {
			t.Fatal(err)
		}
	}
	<-done
}
