package faultproxy

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"time"
)

// stream is a server-to-client message sequence with XLogData, keepalives
// and other messages whose first payload byte is 'w' but which are not
// XLogData, which no corruption may touch.
func stream() (msgs [][]byte, xlog []int) {
	msgs = [][]byte{
		message('R', []byte{0, 0, 0, 0}),
		message('S', []byte("server_version\x0018\x00")),
		message('D', append([]byte("w"), bytes.Repeat([]byte{'x'}, 40)...)), // a DataRow, not CopyData
		message('Z', []byte{'I'}),
		message('W', []byte{0, 0, 0}), // CopyBothResponse
		keepalive(0x1000),
	}
	for i := range 8 {
		xlog = append(xlog, len(msgs))
		msgs = append(msgs, xlogData(uint64(0x2000+i), []byte(fmt.Sprintf("I\x00\x00\x40\x00N\x00\x01t\x00\x00\x00\x05row-%d", i))))
		msgs = append(msgs, keepalive(uint64(0x2000+i)))
	}
	msgs = append(msgs, message('d', append([]byte("w"), 1, 2, 3))) // an XLogData too short for its header
	return msgs, xlog
}

// TestForwardsUnchanged: the handshake (with an SSLRequest answered 'N'),
// then messages split at random places in one direction and raw bytes in
// the other, arrive unchanged, with and without a corruption armed that
// matches nothing.
func TestForwardsUnchanged(t *testing.T) {
	for _, armed := range []bool{false, true} {
		t.Run(fmt.Sprintf("armed=%v", armed), func(t *testing.T) {
			pr := newPair(t)
			pr.handshake(t, true)
			if armed {
				if _, err := pr.p.Corrupt(Corruption{Action: FlipByte, Match: func([]byte) bool { return false }}); err != nil {
					t.Fatal(err)
				}
			}
			rng := rand.New(rand.NewPCG(1, 2))
			msgs, _ := stream()
			all := bytes.Join(msgs, nil)
			big := message('d', append([]byte("w"), bytes.Repeat([]byte("0123456789"), 20000)...)) // larger than the buffers
			all = append(all, big...)
			go writeChunked(pr.server, all, rng)
			expectBytes(t, pr.client, all, "server-to-client stream")

			up := bytes.Repeat([]byte("client data "), 5000)
			go func() { _, _ = pr.client.Write(up) }()
			expectBytes(t, pr.server, up, "client-to-server stream")
			if s := pr.p.Stats(); s.Damaged != 0 || s.Accepted != 1 {
				t.Errorf("stats %+v", s)
			}
		})
	}
}

// TestCorrupt damages one chosen XLogData message in each way; the others,
// before and after it, arrive unchanged.
func TestCorrupt(t *testing.T) {
	third := func(m []byte) bool { return bytes.HasSuffix(m, []byte("row-3")) }
	for _, tc := range []struct {
		name string
		c    Corruption
		want func(orig []byte) []byte // the damaged CopyData payload
	}{
		{"flip type byte", Corruption{Match: third, Action: FlipByte, Offset: 0},
			func(p []byte) []byte { p[25] ^= 0xff; return p }},
		{"flip with mask", Corruption{Match: third, Action: FlipByte, Offset: 5, Mask: 0x01},
			func(p []byte) []byte { p[30] ^= 0x01; return p }},
		{"flip the w", Corruption{Match: third, Action: FlipByte, Offset: -25},
			func(p []byte) []byte { p[0] ^= 0xff; return p }},
		{"flip the last byte", Corruption{Match: third, Action: FlipByte, Offset: 17},
			func(p []byte) []byte { p[42] ^= 0xff; return p }},
		{"first message", Corruption{Action: FlipByte, Offset: 1},
			func(p []byte) []byte { p[26] ^= 0xff; return p }},
		{"truncate", Corruption{Match: third, Action: Truncate, Offset: 7},
			func(p []byte) []byte { return p[:32] }},
		{"truncate to the header", Corruption{Match: third, Action: Truncate, Offset: 0},
			func(p []byte) []byte { return p[:25] }},
		{"truncate the header", Corruption{Match: third, Action: Truncate, Offset: -10},
			func(p []byte) []byte { return p[:15] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pr := newPair(t)
			pr.handshake(t, false)
			done, err := pr.p.Corrupt(tc.c)
			if err != nil {
				t.Fatal(err)
			}
			msgs, xlog := stream()
			target := xlog[0]
			if tc.c.Match != nil {
				target = xlog[3]
			}
			want := make([][]byte, len(msgs))
			for i, m := range msgs {
				want[i] = bytes.Clone(m)
			}
			payload := tc.want(bytes.Clone(msgs[target][5:]))
			want[target] = message('d', payload)
			go writeChunked(pr.server, bytes.Join(msgs, nil), rand.New(rand.NewPCG(3, 4)))
			expectBytes(t, pr.client, bytes.Join(want, nil), "server-to-client stream")
			select {
			case d := <-done:
				orig := msgs[target][5+25:]
				if d.Action != tc.c.Action || d.Offset != tc.c.Offset || d.WALStart != binary.BigEndian.Uint64(msgs[target][6:]) ||
					!bytes.Equal(d.Original, orig) {
					t.Errorf("damage %+v, want the message at WAL %x, original %q", d, binary.BigEndian.Uint64(msgs[target][6:]), orig)
				}
				wantSent := []byte{}
				if len(payload) > 25 {
					wantSent = payload[25:]
				}
				if !bytes.Equal(d.Sent, wantSent) {
					t.Errorf("damage reports %q sent, want %q", d.Sent, wantSent)
				}
			default:
				t.Error("no damage reported")
			}
			if s := pr.p.Stats(); s.Damaged != 1 {
				t.Errorf("stats %+v, want one message damaged", s)
			}
		})
	}
}

// TestCorruptTear sends the damaged message's header, which announces the
// whole message, and the start of its payload, then resets the connection.
func TestCorruptTear(t *testing.T) {
	pr := newPair(t)
	pr.handshake(t, false)
	done, err := pr.p.Corrupt(Corruption{Match: func(m []byte) bool { return bytes.HasSuffix(m, []byte("row-2")) }, Action: Tear, Offset: 4})
	if err != nil {
		t.Fatal(err)
	}
	msgs, xlog := stream()
	go writeChunked(pr.server, bytes.Join(msgs, nil), rand.New(rand.NewPCG(5, 6)))
	head := bytes.Join(msgs[:xlog[2]], nil)
	torn := msgs[xlog[2]][:5+25+4]
	expectBytes(t, pr.client, append(bytes.Clone(head), torn...), "stream up to the tear")
	expectClosed(t, pr.client, "client after the tear")
	expectClosed(t, pr.server, "server after the tear")
	d := <-done
	if !bytes.Equal(d.Sent, torn[30:]) || d.Action != Tear {
		t.Errorf("damage %+v", d)
	}
}

// TestEncryptedNotParsed: after an SSLRequest answered 'S' the bytes are
// TLS, which the proxy passes on without parsing: an armed corruption
// never strikes, even on bytes that look like XLogData.
func TestEncryptedNotParsed(t *testing.T) {
	pr := newPair(t)
	if _, err := pr.client.Write(requestPacket(sslRequestCode)); err != nil {
		t.Fatal(err)
	}
	expectBytes(t, pr.server, requestPacket(sslRequestCode), "SSLRequest")
	done, err := pr.p.Corrupt(Corruption{Action: FlipByte})
	if err != nil {
		t.Fatal(err)
	}
	msgs, _ := stream()
	all := append([]byte{'S'}, bytes.Join(msgs, nil)...)
	go writeChunked(pr.server, all, rand.New(rand.NewPCG(7, 8)))
	expectBytes(t, pr.client, all, "encrypted stream")
	up := bytes.Join(msgs, nil) // "ClientHello" and beyond: not a startup packet
	go func() { _, _ = pr.client.Write(up) }()
	expectBytes(t, pr.server, up, "client's encrypted stream")
	select {
	case d := <-done:
		t.Errorf("damaged an encrypted stream: %+v", d)
	default:
	}
}

// TestCorruptValidation rejects actions and offsets that cannot work.
func TestCorruptValidation(t *testing.T) {
	p := newProxy(t, "127.0.0.1:1")
	for _, c := range []Corruption{{Action: 0}, {Action: 99}, {Action: FlipByte, Offset: -26}} {
		if _, err := p.Corrupt(c); err == nil {
			t.Errorf("Corrupt(%+v) accepted", c)
		}
	}
}

// TestDropAllAndRefuse: DropAll resets both sides of every live
// connection; while refusing, new connections are reset before reaching
// the server; afterwards they work again.
func TestDropAllAndRefuse(t *testing.T) {
	addr, conns := fakeServer(t)
	p := newProxy(t, addr)
	c1, s1 := dial(t, p, conns)
	c2, s2 := dial(t, p, conns)
	if n := p.DropAll(); n != 2 {
		t.Errorf("DropAll dropped %d connections, want 2", n)
	}
	for i, c := range []net.Conn{c1, s1, c2, s2} {
		expectClosed(t, c, fmt.Sprintf("side %d after DropAll", i))
	}

	p.Refuse(time.Hour)
	expectRefused(t, p, "a connection while refusing")
	select {
	case <-conns:
		t.Error("a refused connection reached the server")
	default:
	}
	p.Refuse(0)
	c4, s4 := dial(t, p, conns)
	if _, err := c4.Write(startupPacket()); err != nil {
		t.Fatal(err)
	}
	expectBytes(t, s4, startupPacket(), "after the refusal")
	if s := p.Stats(); s.Accepted != 3 || s.Refused != 1 || s.Dropped != 2 {
		t.Errorf("stats %+v", s)
	}

	// Cut: both at once.
	if n := p.Cut(time.Hour); n != 1 {
		t.Errorf("Cut dropped %d connections, want 1", n)
	}
	expectClosed(t, c4, "client after Cut")
	expectRefused(t, p, "a connection during the cut")
}

// expectRefused connects to p and checks that the connection is reset:
// while connecting or at the first read.
func expectRefused(t *testing.T, p *Proxy, what string) {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		return
	}
	defer c.Close()
	expectClosed(t, c, what)
}

// TestServerUnreachable: a client whose server cannot be reached is reset.
func TestServerUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	p := newProxy(t, addr)
	expectRefused(t, p, "client of an unreachable server")
	if s := p.Stats(); s.Unreachable != 1 || s.Accepted != 1 {
		t.Errorf("stats %+v", s)
	}
}

// TestStall: nothing is forwarded, in either direction, while stalled; all
// of it arrives, in order, when the stall ends; nothing is closed.
func TestStall(t *testing.T) {
	pr := newPair(t)
	pr.handshake(t, false)
	pr.p.Stall(time.Hour)
	if _, err := pr.client.Write([]byte("up")); err != nil {
		t.Fatal(err)
	}
	if _, err := pr.server.Write(keepalive(7)); err != nil {
		t.Fatal(err)
	}
	expectNothing(t, pr.server, "server while stalled")
	expectNothing(t, pr.client, "client while stalled")
	pr.p.Stall(0)
	expectBytes(t, pr.server, []byte("up"), "server after the stall")
	expectBytes(t, pr.client, keepalive(7), "client after the stall")
	if s := pr.p.Stats(); s.Stalls != 1 || s.Dropped != 0 {
		t.Errorf("stats %+v", s)
	}
}

// TestHalfClose: the closed direction ends (EOF) while the other keeps
// flowing.
func TestHalfClose(t *testing.T) {
	t.Run("to-client", func(t *testing.T) {
		pr := newPair(t)
		pr.handshake(t, false)
		if n := pr.p.HalfClose(ToClient); n != 1 {
			t.Fatalf("HalfClose affected %d connections", n)
		}
		_ = pr.client.SetReadDeadline(time.Now().Add(10 * time.Second))
		if n, err := pr.client.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("client read %d bytes, %v; want EOF", n, err)
		}
		if _, err := pr.client.Write([]byte("still")); err != nil {
			t.Fatal(err)
		}
		expectBytes(t, pr.server, []byte("still"), "server after the half-close")
		// What the server sends now is dropped: the client's stream has
		// ended, and stays ended.
		if _, err := pr.server.Write(keepalive(1)); err != nil {
			t.Fatal(err)
		}
		if n, err := pr.client.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("client read %d bytes, %v after its direction was closed; want EOF", n, err)
		}
	})
	t.Run("to-server", func(t *testing.T) {
		pr := newPair(t)
		pr.handshake(t, false)
		pr.p.HalfClose(ToServer)
		_ = pr.server.SetReadDeadline(time.Now().Add(10 * time.Second))
		if n, err := pr.server.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("server read %d bytes, %v; want EOF", n, err)
		}
		if _, err := pr.server.Write(keepalive(2)); err != nil {
			t.Fatal(err)
		}
		expectBytes(t, pr.client, keepalive(2), "client after the half-close")
		// The server closing ends the client's stream too.
		pr.server.Close()
		expectClosed(t, pr.client, "client after the server closed")
	})
}

// TestClose resets live connections and refuses new ones.
func TestClose(t *testing.T) {
	pr := newPair(t)
	if err := pr.p.Close(); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, pr.client, "client after Close")
	if _, err := net.Dial("tcp", pr.p.Addr()); err == nil {
		t.Error("the proxy still accepts connections after Close")
	}
	if pr.p.Conns() != 0 {
		t.Errorf("%d connections left", pr.p.Conns())
	}
}

// TestServerClosesDuringHandshake: a server that closes instead of
// answering an SSLRequest ends the client's connection, and the proxy
// forgets it.
func TestServerClosesDuringHandshake(t *testing.T) {
	pr := newPair(t)
	if _, err := pr.client.Write(requestPacket(sslRequestCode)); err != nil {
		t.Fatal(err)
	}
	expectBytes(t, pr.server, requestPacket(sslRequestCode), "SSLRequest")
	pr.server.Close()
	expectClosed(t, pr.client, "client after the server closed")
	pr.client.Close()
	deadline := time.Now().Add(10 * time.Second)
	for pr.p.Conns() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the proxy still holds the connection")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
