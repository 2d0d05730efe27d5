package apply

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/walapply/walapply/protocol"
)

// keepaliveAfter is how long the loop may leave the stream unanswered
// before the keeper sends a status update for it.
const keepaliveAfter = time.Second

// streamKeeper serialises the use of the replication stream between the
// run loop and its keepalive goroutine.
//
// The source's walsender drops a client that has not answered for
// wal_sender_timeout (60s by default). The run loop answers between
// messages, but a single target statement can take longer than that (a
// 1 GB value, a big multi-row statement on a slow target), and the source
// would then end the stream and the applier start over, for ever. A
// streamKeeper answers for the loop while it is busy: from a goroutine of
// its own, with the positions the loop last confirmed (so it never confirms
// anything new), and only while the loop is not using the stream.
type streamKeeper struct {
	mu     sync.Mutex
	stream *protocol.ReplStream
	// uses counts the loop's uses of the stream; the keeper notices from
	// its own clock when it stops moving (a clock read per message would
	// be a measurable share of the loop's time).
	uses atomic.Uint64
	// the positions last sent by the loop
	write, flush, apply atomic.Uint64
}

// use runs fn with the stream to itself.
func (k *streamKeeper) use(fn func(*protocol.ReplStream) error) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	err := fn(k.stream)
	k.uses.Add(1)
	return err
}

// sent records the positions the loop confirmed.
func (k *streamKeeper) sent(w, f, a protocol.LSN) {
	k.write.Store(uint64(w))
	k.flush.Store(uint64(f))
	k.apply.Store(uint64(a))
}

// sendStatus confirms w, f and a to the source (the run loop's feedback)
// and records them for resendStatus. Every standby status update walapply
// sends goes through writeStatus.
func (k *streamKeeper) sendStatus(ctx context.Context, w, f, a protocol.LSN, replyRequested bool) error {
	err := k.use(func(*protocol.ReplStream) error { return k.writeStatus(ctx, w, f, a, replyRequested) })
	k.sent(w, f, a)
	return err
}

// resendStatus sends the positions last confirmed again, as a keepalive
// (a long replay of a streamed transaction, internal/engine/stream.go).
func (k *streamKeeper) resendStatus(ctx context.Context) error {
	w, f, a := k.last()
	return k.use(func(*protocol.ReplStream) error { return k.writeStatus(ctx, w, f, a, false) })
}

// writeStatus sends one standby status update; the caller has the stream
// to itself (use, or run's lock).
func (k *streamKeeper) writeStatus(ctx context.Context, w, f, a protocol.LSN, replyRequested bool) error {
	return k.stream.SendStatus(ctx, w, f, a, replyRequested)
}

// last returns the positions the loop last confirmed.
func (k *streamKeeper) last() (w, f, a protocol.LSN) {
	return protocol.LSN(k.write.Load()), protocol.LSN(k.flush.Load()), protocol.LSN(k.apply.Load())
}

// run answers the source while the loop is busy, until ctx ends.
func (k *streamKeeper) run(ctx context.Context) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	seen, quietSince := k.uses.Load(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n := k.uses.Load(); n != seen {
			seen, quietSince = n, time.Now()
		}
		if time.Since(quietSince) < keepaliveAfter {
			continue
		}
		if !k.mu.TryLock() {
			continue // the loop is using the stream: it answers itself
		}
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		w, f, a := k.last()
		err := k.writeStatus(sctx, w, f, a, false)
		cancel()
		quietSince = time.Now()
		k.mu.Unlock()
		if err != nil {
			return // the loop will find the stream broken
		}
	}
}
