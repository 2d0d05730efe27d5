package protocol

import (
	"context"
	"net"
	"syscall"
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
func (c *scriptedConn) SetDeadline(time.Time) error     { return nil }

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
			c.await = func(d time.Duration) { slept = append(slept, d) }
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

// Where the kernel cannot wait for a window's worth, the pause is a sleep,
// skipped when that much already waits (the walsender is ahead).
func TestSleepUnlessEnough(t *testing.T) {
	for waiting, want := range map[int]int{-1: 1, 0: 1, coalesceEnough - 1: 1, coalesceEnough: 0, 4 * coalesceEnough: 0} {
		slept := 0
		sleepUnlessEnough(func() int { return waiting }, func(time.Duration) { slept++ })(time.Millisecond)
		if slept != want {
			t.Errorf("%d bytes waiting: slept %d times, want %d", waiting, slept, want)
		}
	}
}

// On a real socket: the dialer gives a TCP replication connection its small
// receive buffer, the connection can tell how much waits on it, and its
// pause ends as soon as a window's worth waits, leaving the low-water mark
// at 1 for the Go runtime's poller.
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
	conn, err := coalescing(d.DialContext, coalescePause)(context.Background(), "tcp", ln.Addr().String())
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
	tc, ok := c.Conn.(*net.TCPConn)
	if !ok {
		t.Fatalf("dialed %T, want a TCP connection inside", c.Conn)
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var size int
	var serr error
	if err := raw.Control(func(fd uintptr) {
		size, serr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF)
	}); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	// Linux doubles the size asked for, for its bookkeeping.
	if size != 2*coalesceRcvBuf {
		t.Errorf("SO_RCVBUF %d, want %d", size, 2*coalesceRcvBuf)
	}
	waiting := socketWaiting(tc)
	if n := waiting(); n != 0 {
		t.Errorf("%d bytes waiting before any was sent", n)
	}
	if _, err := server.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); waiting() != 5; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes waiting, want the 5 sent", waiting())
		}
	}
	buf := make([]byte, 16)
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("read %q, %v; want hello", buf[:n], err)
	}
	if n := waiting(); n != 0 {
		t.Errorf("%d bytes waiting after all was read", n)
	}

	// The wait goes on while less than a window's worth waits, and ends
	// once that much does, however long it may be: an hour here (the guard
	// below fails a wait that misses it long before). A correct wait never
	// ends early, so the look for one cannot fail it by chance.
	if _, err := server.Write(make([]byte, coalesceEnough-1)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); waiting() < coalesceEnough-1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes waiting, want the %d sent", waiting(), coalesceEnough-1)
		}
	}
	done := make(chan struct{})
	go func() { c.await(time.Hour); close(done) }()
	time.Sleep(50 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("the pause ended with less than a window's worth waiting")
	default:
	}
	if _, err := server.Write([]byte{0}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the pause went on with a window's worth waiting")
	}
	var lowat int
	if err := raw.Control(func(fd uintptr) {
		lowat, serr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT)
	}); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	if lowat != 1 {
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
	c := newCoalescingConn(&scriptedConn{sizes: make([]int, 2000)}, time.Microsecond)
	c.await = func(time.Duration) {}
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
