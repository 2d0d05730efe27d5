package apply

import (
	"context"
	"sync"
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
