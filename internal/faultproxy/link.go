package faultproxy

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// Request codes of the untyped packets a client may send before its
// startup packet; the server answers each with one unframed byte.
const (
	sslRequestCode    = 80877103
	gssencRequestCode = 80877104
)

// errLinkClosed is what a write returns once the link is closed.
var errLinkClosed = errors.New("faultproxy: connection closed")

// link is one proxied connection: two pumps, one per direction.
type link struct {
	p      *Proxy
	client *net.TCPConn
	closed chan struct{} // closed when the link ends

	mu     sync.Mutex
	ended  bool
	server *net.TCPConn // nil until connected

	// pendingAnswers counts the SSLRequest and GSSENCRequest packets
	// forwarded whose one-byte answer has not come back yet; answers hands
	// the answers to the client-to-server parser, which needs to know
	// whether encryption follows.
	pendingAnswers atomic.Int32
	answers        chan byte
	// toClientDone is closed when the server-to-client pump ends: no
	// answer will come any more.
	toClientDone chan struct{}

	half [2]atomic.Bool // indexed by Direction: shut down by HalfClose
}

func newLink(p *Proxy, client *net.TCPConn) *link {
	return &link{p: p, client: client, closed: make(chan struct{}), answers: make(chan byte, 4), toClientDone: make(chan struct{})}
}

// connected sets the server side; false means the link was closed while
// connecting (the caller closes server).
func (l *link) connected(server *net.TCPConn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return false
	}
	l.server = server
	return true
}

// run forwards both directions until both have ended, then closes.
func (l *link) run() {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); l.pumpToServer() }()
	go func() { defer wg.Done(); l.pumpToClient() }()
	wg.Wait()
	l.end(false)
}

// end closes both sides, with a reset or normally, and forgets the link.
// Only the first call does anything; it returns true.
func (l *link) end(reset bool) bool {
	l.mu.Lock()
	if l.ended {
		l.mu.Unlock()
		return false
	}
	l.ended = true
	server := l.server
	l.mu.Unlock()
	close(l.closed)
	l.p.forget(l)
	for _, c := range []*net.TCPConn{l.client, server} {
		switch {
		case c == nil:
		case reset:
			resetConn(c)
		default:
			_ = c.Close()
		}
	}
	return true
}

func (l *link) reset() bool { return l.end(true) }

// halfClose sends a FIN in direction dir; what still comes for it is
// discarded by its gatedWriter. A link still connecting to the server only
// has the direction marked: nothing will be forwarded in it.
func (l *link) halfClose(dir Direction) {
	l.half[dir].Store(true)
	if c := l.dst(dir); c != nil {
		_ = c.CloseWrite()
	}
}

func (l *link) dst(dir Direction) *net.TCPConn {
	if dir == ToClient {
		return l.client
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.server
}

// readEnded handles the end of the stream a pump reads: a clean EOF is
// passed on as a FIN (the other direction keeps going), anything else
// resets the link.
func (l *link) readEnded(dir Direction, err error) {
	if errors.Is(err, io.EOF) {
		_ = l.dst(dir).CloseWrite()
		return
	}
	l.reset()
}

// gatedWriter writes one direction of a link: it waits while the proxy is
// stalled and discards what comes after a HalfClose of its direction.
type gatedWriter struct {
	l   *link
	dir Direction
}

func (w *gatedWriter) Write(b []byte) (int, error) {
	if !w.l.p.waitForward(w.l.closed) {
		return 0, errLinkClosed
	}
	if w.l.half[w.dir].Load() {
		return len(b), nil
	}
	n, err := w.l.dst(w.dir).Write(b)
	if err != nil && w.l.half[w.dir].Load() {
		return len(b), nil
	}
	return n, err
}

// copyRaw forwards everything r yields to w, unparsed.
func (l *link) copyRaw(dir Direction, r io.Reader, w io.Writer) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				l.reset()
				return
			}
		}
		if err != nil {
			l.readEnded(dir, err)
			return
		}
	}
}

// pumpToServer forwards the client's bytes. Only the handshake is parsed:
// untyped packets (Int32 length counting itself, Int32 code) until the
// startup packet, to know when the server answers with an unframed byte.
func (l *link) pumpToServer() {
	r := bufio.NewReaderSize(l.client, 32<<10)
	w := &gatedWriter{l: l, dir: ToServer}
	for {
		var hdr [8]byte
		k, err := io.ReadFull(r, hdr[:])
		if err != nil {
			if k > 0 {
				if _, werr := w.Write(hdr[:k]); werr != nil {
					l.reset()
					return
				}
			}
			l.readEnded(ToServer, eof(err))
			return
		}
		n, code := binary.BigEndian.Uint32(hdr[:4]), binary.BigEndian.Uint32(hdr[4:])
		request := n == 8 && (code == sslRequestCode || code == gssencRequestCode)
		if request {
			l.pendingAnswers.Add(1)
		}
		if _, err := w.Write(hdr[:]); err != nil {
			l.reset()
			return
		}
		if !request {
			break // the startup packet, a cancel request or not PostgreSQL
		}
		select {
		case a := <-l.answers:
			if a == 'S' || a == 'G' {
				l.copyRaw(ToServer, r, w) // encrypted from here on
				return
			}
		case <-l.toClientDone:
			// The server went away without answering: pass on what
			// the client still sends, until it notices.
			l.copyRaw(ToServer, r, w)
			return
		case <-l.closed:
			return
		}
	}
	l.copyRaw(ToServer, r, w)
}

// eof turns a stream that ended inside a message into a plain end of
// stream: what came has been passed on, and the FIN follows.
func eof(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return io.EOF
	}
	return err
}

// pumpToClient forwards the server's messages one by one, damaging the one
// an armed Corruption matches.
func (l *link) pumpToClient() {
	defer close(l.toClientDone)
	r := bufio.NewReaderSize(l.server, 64<<10)
	gw := &gatedWriter{l: l, dir: ToClient}
	w := bufio.NewWriterSize(gw, 64<<10)
	// ended passes on what was read before a read error, then the error.
	ended := func(err error) {
		if w.Flush() != nil {
			l.reset()
			return
		}
		l.readEnded(ToClient, eof(err))
	}
	var body []byte
	for {
		// Wait for the server to say something before deciding how to
		// read it: it never speaks first, so once a byte is here, the
		// client's packet that caused it has been counted.
		if _, err := r.Peek(1); err != nil {
			ended(err)
			return
		}
		if l.pendingAnswers.Load() > 0 {
			b, _ := r.ReadByte()
			l.pendingAnswers.Add(-1)
			if w.WriteByte(b) != nil || w.Flush() != nil {
				l.reset()
				return
			}
			select {
			case l.answers <- b:
			default:
			}
			if b == 'S' || b == 'G' {
				l.copyRaw(ToClient, r, gw)
				return
			}
			continue
		}
		var hdr [5]byte
		if k, err := io.ReadFull(r, hdr[:]); err != nil {
			if _, werr := w.Write(hdr[:k]); werr != nil {
				l.reset()
				return
			}
			ended(err)
			return
		}
		n := binary.BigEndian.Uint32(hdr[1:])
		if n < 4 { // not the PostgreSQL protocol: stop parsing
			if _, err := w.Write(hdr[:]); err != nil || w.Flush() != nil {
				l.reset()
				return
			}
			l.copyRaw(ToClient, r, gw)
			return
		}
		size := int64(n) - 4
		if hdr[0] == 'd' && size > 0 && l.p.armed.Load() != nil {
			if int64(cap(body)) < size {
				body = make([]byte, size)
			}
			body = body[:size]
			if k, err := io.ReadFull(r, body); err != nil {
				if _, werr := w.Write(hdr[:]); werr != nil {
					l.reset()
					return
				}
				if _, werr := w.Write(body[:k]); werr != nil {
					l.reset()
					return
				}
				ended(err)
				return
			}
			if a := l.p.take(body); a != nil {
				if !l.damage(w, hdr, body, a) {
					return
				}
				continue
			}
			if _, err := w.Write(hdr[:]); err != nil {
				l.reset()
				return
			}
			if _, err := w.Write(body); err != nil {
				l.reset()
				return
			}
		} else {
			if _, err := w.Write(hdr[:]); err != nil {
				l.reset()
				return
			}
			if _, err := io.CopyN(w, r, size); err != nil {
				// io.EOF: the server's stream ended inside the message
				// (pass on what came, then the FIN); anything else is a
				// broken read or write.
				if errors.Is(err, io.EOF) {
					ended(err)
				} else {
					l.reset()
				}
				return
			}
		}
		if r.Buffered() == 0 && w.Flush() != nil {
			l.reset()
			return
		}
	}
}

// damage sends the CopyData message hdr+payload damaged by a and reports
// it. It returns whether forwarding goes on (not after Tear, nor after a
// write error).
func (l *link) damage(w *bufio.Writer, hdr [5]byte, payload []byte, a *armed) bool {
	out, d := a.c.apply(payload)
	if a.c.Action != Tear {
		binary.BigEndian.PutUint32(hdr[1:], uint32(len(out)+4))
	}
	_, err := w.Write(hdr[:])
	if err == nil {
		_, err = w.Write(out)
	}
	if err == nil {
		err = w.Flush()
	}
	l.p.damaged(a, d)
	if err != nil || a.c.Action == Tear {
		l.reset()
		return false
	}
	return true
}
