package faultproxy

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Direction names one direction of a proxied connection.
type Direction int

const (
	// ToClient is the server-to-client direction.
	ToClient Direction = iota
	// ToServer is the client-to-server direction.
	ToServer
)

func (d Direction) String() string {
	if d == ToClient {
		return "to-client"
	}
	return "to-server"
}

// Stats counts what a Proxy did.
type Stats struct {
	Accepted    int // client connections accepted while not refusing
	Refused     int // client connections reset at once while refusing
	Unreachable int // accepted connections reset because the server could not be reached
	Dropped     int // connections reset by DropAll or Cut
	HalfClosed  int // connection directions shut down by HalfClose
	Stalls      int // calls to Stall with a positive duration
	Damaged     int // messages damaged by Corrupt
}

// Proxy forwards the TCP connections it accepts on 127.0.0.1 to a server,
// with faults on demand (see the package doc). Its methods may be called
// from any goroutine.
type Proxy struct {
	ln     net.Listener
	server string
	// dialTimeout bounds the connection to the server.
	dialTimeout time.Duration

	mu          sync.Mutex
	links       map[*link]struct{}
	refuseUntil time.Time
	stallUntil  time.Time
	stallChange chan struct{} // closed (and replaced) when stallUntil changes
	closed      bool
	stats       Stats

	armed atomic.Pointer[armed] // a one-shot corruption, taken by the first match
	wg    sync.WaitGroup
}

// New starts a proxy on 127.0.0.1 (a free port) that forwards to server
// ("host:port").
func New(server string) (*Proxy, error) {
	if _, _, err := net.SplitHostPort(server); err != nil {
		return nil, fmt.Errorf("faultproxy: server address %q: %w", server, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listening on 127.0.0.1: %w", err)
	}
	p := &Proxy{ln: ln, server: server, dialTimeout: 5 * time.Second,
		links: map[*link]struct{}{}, stallChange: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the proxy's address, "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Port returns the port the proxy listens on.
func (p *Proxy) Port() int {
	_, port, _ := net.SplitHostPort(p.Addr())
	n, _ := strconv.Atoi(port)
	return n
}

// Close stops accepting, resets every live connection and waits for the
// proxy's goroutines. An armed corruption is dropped.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	links := p.snapshot()
	close(p.stallChange) // wake stalled pumps
	p.stallChange = make(chan struct{})
	p.stallUntil = time.Time{}
	p.mu.Unlock()
	err := p.ln.Close()
	for _, l := range links {
		l.reset()
	}
	p.wg.Wait()
	return err
}

// Stats returns the counters so far.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Conns returns the number of live connections.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

// DropAll resets every live connection, on both sides (also those still
// connecting to the server), and returns how many there were.
func (p *Proxy) DropAll() int {
	p.mu.Lock()
	links := p.snapshot()
	p.mu.Unlock()
	n := 0
	for _, l := range links {
		if l.reset() {
			n++
		}
	}
	p.mu.Lock()
	p.stats.Dropped += n
	p.mu.Unlock()
	return n
}

// Refuse resets every connection accepted during the next d; d <= 0 ends a
// refusal.
func (p *Proxy) Refuse(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuseUntil = time.Time{}
	if d > 0 {
		p.refuseUntil = time.Now().Add(d)
	}
}

// Cut is a network cut of d: DropAll, and new connections refused for d.
// It returns how many connections it dropped.
func (p *Proxy) Cut(d time.Duration) int {
	p.Refuse(d)
	return p.DropAll()
}

// Stall stops forwarding in both directions of every connection, live or
// new, for d; nothing is closed. d <= 0 ends a stall at once.
func (p *Proxy) Stall(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stallUntil = time.Time{}
	if d > 0 {
		p.stallUntil = time.Now().Add(d)
		p.stats.Stalls++
	}
	close(p.stallChange)
	p.stallChange = make(chan struct{})
}

// HalfClose shuts down direction dir of every live connection: the
// receiving side sees the end of the stream (a FIN) while the other
// direction keeps flowing. Data still arriving for the closed direction is
// discarded. It returns how many connections it affected.
func (p *Proxy) HalfClose(dir Direction) int {
	p.mu.Lock()
	links := p.snapshot()
	p.stats.HalfClosed += len(links)
	p.mu.Unlock()
	for _, l := range links {
		l.halfClose(dir)
	}
	return len(links)
}

// Corrupt arms c: the first XLogData message that c matches, on any
// connection, from now on, is damaged. The returned channel receives what
// was done (once). Arming again replaces a corruption that has not struck
// yet; its channel then never receives.
func (p *Proxy) Corrupt(c Corruption) (<-chan Damage, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	a := &armed{c: c, done: make(chan Damage, 1)}
	p.armed.Store(a)
	return a.done, nil
}

// Disarm drops a corruption that has not struck yet.
func (p *Proxy) Disarm() { p.armed.Store(nil) }

// take returns the armed corruption if it matches the CopyData payload,
// disarming it; nil otherwise.
func (p *Proxy) take(payload []byte) *armed {
	a := p.armed.Load()
	if a == nil || !a.c.matches(payload) {
		return nil
	}
	if !p.armed.CompareAndSwap(a, nil) {
		return nil // another connection took it
	}
	return a
}

func (p *Proxy) damaged(a *armed, d Damage) {
	p.mu.Lock()
	p.stats.Damaged++
	p.mu.Unlock()
	a.done <- d
}

func (p *Proxy) snapshot() []*link {
	out := make([]*link, 0, len(p.links))
	for l := range p.links {
		out = append(out, l)
	}
	return out
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		client := c.(*net.TCPConn)
		p.mu.Lock()
		refuse := p.closed || time.Now().Before(p.refuseUntil)
		var l *link
		if refuse {
			p.stats.Refused++
		} else {
			p.stats.Accepted++
			l = newLink(p, client)
			p.links[l] = struct{}{}
			p.wg.Add(1)
		}
		p.mu.Unlock()
		if refuse {
			resetConn(client)
			continue
		}
		go p.connect(l)
	}
}

// connect dials the server for an accepted client and runs the link. The
// link is live from the start, so that DropAll also drops a connection that
// is still being made.
func (p *Proxy) connect(l *link) {
	defer p.wg.Done()
	s, err := net.DialTimeout("tcp", p.server, p.dialTimeout)
	if err != nil {
		p.mu.Lock()
		p.stats.Unreachable++
		p.mu.Unlock()
		l.reset()
		return
	}
	if !l.connected(s.(*net.TCPConn)) {
		resetConn(s.(*net.TCPConn))
		return
	}
	l.run()
}

// forget removes an ended link.
func (p *Proxy) forget(l *link) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.links, l)
}

// waitForward blocks while forwarding is stalled; false means the link
// closed meanwhile.
func (p *Proxy) waitForward(closed <-chan struct{}) bool {
	for {
		p.mu.Lock()
		wait, change := time.Until(p.stallUntil), p.stallChange
		p.mu.Unlock()
		if wait <= 0 {
			return true
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-change:
		case <-closed:
			t.Stop()
			return false
		}
		t.Stop()
	}
}

// resetConn closes c with a reset rather than an orderly FIN.
func resetConn(c *net.TCPConn) {
	_ = c.SetLinger(0)
	_ = c.Close()
}
