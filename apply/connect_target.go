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

// sourceDial is the source's replication connection being opened in the
// background while the session works on the target (connectTargets, the
// privilege check, the migration, the lease): a start no longer waits for
// the two sides one after the other. What the session does with the
// connection, and in which order it reports errors, is as before: take is
// called where the connection used to be opened.
type sourceDial struct {
	done   chan struct{}
	conn   *protocol.ReplConn
	err    error
	cancel context.CancelFunc
	taken  bool
}

// dialSource starts opening the session's replication connection.
func (s *session) dialSource(ctx context.Context) *sourceDial {
	dctx, cancel := context.WithCancel(ctx)
	d := &sourceDial{done: make(chan struct{}), cancel: cancel}
	source, name := s.cfg.Source, s.cfg.replicationName("stream") // read here: the session goes on with cfg
	go func() {
		defer close(d.done)
		d.conn, d.err = protocol.ConnectReplication(dctx, source, name)
	}()
	return d
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
	if d.taken {
		return
	}
	d.cancel()
	go func() {
		<-d.done
		if d.conn != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = d.conn.Close(ctx)
		}
	}()
}
