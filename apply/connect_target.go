package apply

import (
	"context"
	"sync"
	"time"

	"github.com/walapply/walapply/protocol"
)

// connectTargets opens the session's two target connections, apply and
// control, at the same time: each costs the target a backend's start and
// the client a few round trips (more with TLS and SCRAM), and a start waits
// for both anyway. The errors are reported as when they were opened one
// after the other: the apply connection's first. A connection opened while
// the other failed is kept in the session, whose close ends it.
func (s *session) connectTargets(ctx context.Context) error {
	var wg sync.WaitGroup
	var applyErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.target, applyErr = connectTarget(ctx, s.cfg, "apply")
	}()
	control, controlErr := connectTarget(ctx, s.cfg, "control")
	wg.Wait()
	s.control = control
	if applyErr != nil {
		return applyErr
	}
	return controlErr
}

// dial is a connection being opened in the background while the session
// works on something else: a start no longer waits for its connections
// one after the other.
type dial[C interface{ Close(context.Context) error }] struct {
	done   chan struct{}
	conn   C
	err    error
	cancel context.CancelFunc
}

// startDial starts opening a connection with open.
func startDial[C interface{ Close(context.Context) error }](ctx context.Context, open func(context.Context) (C, error)) *dial[C] {
	dctx, cancel := context.WithCancel(ctx)
	d := &dial[C]{done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(d.done)
		d.conn, d.err = open(dctx)
	}()
	return d
}

// wait waits for the connection, or for ctx to end.
func (d *dial[C]) wait(ctx context.Context) (C, error) {
	select {
	case <-d.done:
		return d.conn, d.err
	case <-ctx.Done():
		var none C
		return none, ctx.Err()
	}
}

// discard stops the dial and closes what it opened: at once if it is
// open, or in the background when the cancelled dial returns, so that it
// never waits for a dial under way.
func (d *dial[C]) discard() {
	d.cancel()
	end := func() {
		<-d.done
		if d.err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = d.conn.Close(ctx)
		}
	}
	select {
	case <-d.done:
		end()
	default:
		go end()
	}
}

// sourceDial is the source's replication connection being opened in the
// background while the session works on the target (connectTargets, the
// privilege check, the migration, the lease). What the session does with
// the connection, and in which order it reports errors, is as before:
// take is called where the connection used to be opened.
type sourceDial struct {
	*dial[*protocol.ReplConn]
	taken bool
}

// dialSource starts opening the session's replication connection.
func (s *session) dialSource(ctx context.Context) *sourceDial {
	source, name := s.cfg.Source, s.cfg.replicationName("stream") // read here: the session goes on with cfg
	return &sourceDial{dial: startDial(ctx, func(ctx context.Context) (*protocol.ReplConn, error) {
		return protocol.ConnectReplication(ctx, source, name)
	})}
}

// take waits for the connection and hands it over.
func (d *sourceDial) take() (*protocol.ReplConn, error) {
	<-d.done
	d.cancel() // the connection keeps nothing of the dial's context
	d.taken = true
	return d.conn, d.err
}

// abandon, for a start that ends before it took the connection, stops the
// dial and closes what it opens; it returns at once, and does nothing
// after take.
func (d *sourceDial) abandon() {
	if !d.taken {
		d.discard()
	}
}
