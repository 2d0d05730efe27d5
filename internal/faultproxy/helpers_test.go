package faultproxy

import (
	"bytes"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"time"
)

// pair is a proxied connection for tests: client talks to the proxy,
// server is the connection the proxy made to the fake server.
type pair struct {
	p      *Proxy
	client net.Conn
	server net.Conn
}

// fakeServer listens on 127.0.0.1; every connection it accepts is sent on
// the returned channel.
func fakeServer(t *testing.T) (string, <-chan net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	conns := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			conns <- c
		}
	}()
	return ln.Addr().String(), conns
}

func newProxy(t *testing.T, server string) *Proxy {
	t.Helper()
	p, err := New(server)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// dial connects a client through p and returns the server's end.
func dial(t *testing.T, p *Proxy, conns <-chan net.Conn) (client, server net.Conn) {
	t.Helper()
	client, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	select {
	case server = <-conns:
	case <-time.After(10 * time.Second):
		t.Fatal("the proxy did not connect to the server")
	}
	return client, server
}

// newPair starts a fake server and a proxy, and connects a client.
func newPair(t *testing.T) *pair {
	t.Helper()
	addr, conns := fakeServer(t)
	p := newProxy(t, addr)
	c, s := dial(t, p, conns)
	return &pair{p: p, client: c, server: s}
}

// startupPacket is a protocol 3.0 startup packet.
func startupPacket() []byte {
	body := []byte("user\x00postgres\x00database\x00postgres\x00\x00")
	b := binary.BigEndian.AppendUint32(nil, uint32(8+len(body)))
	b = binary.BigEndian.AppendUint32(b, 196608)
	return append(b, body...)
}

func requestPacket(code uint32) []byte {
	b := binary.BigEndian.AppendUint32(nil, 8)
	return binary.BigEndian.AppendUint32(b, code)
}

// message frames body as a protocol message of type typ.
func message(typ byte, body []byte) []byte {
	b := append([]byte{typ}, binary.BigEndian.AppendUint32(nil, uint32(4+len(body)))...)
	return append(b, body...)
}

// xlogData is a CopyData message carrying XLogData: WAL start, end, time
// and a pgoutput message.
func xlogData(walStart uint64, msg []byte) []byte {
	p := []byte{'w'}
	p = binary.BigEndian.AppendUint64(p, walStart)
	p = binary.BigEndian.AppendUint64(p, walStart+100)
	p = binary.BigEndian.AppendUint64(p, 12345)
	return message('d', append(p, msg...))
}

// keepalive is a CopyData primary keepalive.
func keepalive(walEnd uint64) []byte {
	p := []byte{'k'}
	p = binary.BigEndian.AppendUint64(p, walEnd)
	p = binary.BigEndian.AppendUint64(p, 999)
	return message('d', append(p, 0))
}

// writeChunked writes b in random small pieces, so the proxy's parser sees
// messages split across reads. It runs in a goroutine of its own; a failure
// shows as data missing at the reader.
func writeChunked(c net.Conn, b []byte, rng *rand.Rand) {
	for len(b) > 0 {
		n := min(len(b), 1+rng.IntN(40))
		if _, err := c.Write(b[:n]); err != nil {
			return
		}
		b = b[n:]
	}
}

// readN reads exactly n bytes with a generous deadline.
func readN(t *testing.T, c net.Conn, n int) []byte {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("reading %d bytes: %v", n, err)
	}
	return b
}

// expectBytes reads len(want) bytes and compares.
func expectBytes(t *testing.T, c net.Conn, want []byte, what string) {
	t.Helper()
	if got := readN(t, c, len(want)); !bytes.Equal(got, want) {
		t.Fatalf("%s: got\n%q\nwant\n%q", what, got, want)
	}
}

// handshake runs a startup through the pair: optionally an SSLRequest
// answered 'N' first.
func (pr *pair) handshake(t *testing.T, ssl bool) {
	t.Helper()
	if ssl {
		if _, err := pr.client.Write(requestPacket(sslRequestCode)); err != nil {
			t.Fatal(err)
		}
		expectBytes(t, pr.server, requestPacket(sslRequestCode), "SSLRequest at the server")
		if _, err := pr.server.Write([]byte{'N'}); err != nil {
			t.Fatal(err)
		}
		expectBytes(t, pr.client, []byte{'N'}, "SSL answer at the client")
	}
	if _, err := pr.client.Write(startupPacket()); err != nil {
		t.Fatal(err)
	}
	expectBytes(t, pr.server, startupPacket(), "startup packet at the server")
}

// expectClosed checks that a read on c ends (EOF or reset) rather than
// yielding data.
func expectClosed(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	var b [1]byte
	n, err := c.Read(b[:])
	if err == nil {
		t.Fatalf("%s: read %d bytes (%q), want the connection ended", what, n, b[:n])
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("%s: still open", what)
	}
}

// expectNothing checks that nothing arrives on c for a moment: used while
// forwarding is stalled. It cannot fail because the machine is slow, only
// because something arrived.
func expectNothing(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(150 * time.Millisecond))
	defer c.SetReadDeadline(time.Time{})
	var b [1]byte
	n, err := c.Read(b[:])
	if n > 0 || err == nil {
		t.Fatalf("%s: %q arrived", what, b[:n])
	}
	if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("%s: %v, want nothing at all", what, err)
	}
}
