package parallel

import (
	"context"
	"maps"
	"slices"
)

// Dialer opens the workers' connections, declared where it is used:
// package apply connects to the target and sets the session up like the
// main one's, with the worker's own origin; the tests hand out fakes.
type Dialer interface {
	// Worker connects worker id (from 1) and returns its applier.
	Worker(ctx context.Context, id int) (Applier, error)
}

// Options configure a pool.
type Options struct {
	// Size is the most workers the pool opens (Config.ParallelWorkers).
	Size int
	// MinRun is the number of consecutive inserts into one relation after
	// which a worker sends the rest of the run with COPY (apply's
	// copyMinRun, the spill replay's too).
	MinRun int
	Dial   Dialer
}

// Pool is the workers of a session and the transactions they apply, kept
// by the run loop (none of its methods is safe for another goroutine).
type Pool struct {
	opt     Options
	workers []*Worker
	// byXid holds the worker of every transaction applied as it streams
	// and not yet committed, prepared or aborted.
	byXid map[uint32]*Worker
	// Block is the worker of the open stream block, nil between blocks
	// and for a block of a spilled transaction.
	Block *Worker
	watch *Watch
}

// New returns a pool whose workers watch reports lock waits of (nil: no
// watch, in tests).
func New(opt Options, watch *Watch) *Pool {
	return &Pool{opt: opt, byXid: map[uint32]*Worker{}, watch: watch}
}

// Of returns the worker of transaction xid, nil when it is not applied as
// it streams.
func (p *Pool) Of(xid uint32) *Worker { return p.byXid[xid] }

// Take assigns an idle worker to the new streamed transaction xid and
// opens its target transaction; it returns nil when every worker is busy
// and the pool is full, or when a new worker's connection failed (err:
// not fatal, the transaction is spilled).
func (p *Pool) Take(ctx context.Context, xid uint32) (*Worker, error) {
	w, err := p.idle(ctx)
	if w == nil {
		return nil, err
	}
	w.busy = true
	p.byXid[xid] = w
	w.Begin(xid)
	return w, nil
}

// idle returns a worker that is neither busy nor failed, opening one while
// the pool is not full.
func (p *Pool) idle(ctx context.Context) (*Worker, error) {
	for _, w := range p.workers {
		if !w.busy && !w.failed.Load() {
			return w, nil
		}
	}
	if len(p.workers) >= p.opt.Size {
		return nil, nil
	}
	app, err := p.opt.Dial.Worker(ctx, len(p.workers)+1)
	if err != nil {
		return nil, err
	}
	w := newWorker(ctx, len(p.workers)+1, app, p.opt.MinRun)
	p.workers = append(p.workers, w)
	if p.watch != nil {
		p.watch.add(w)
	}
	return w, nil
}

// Release ends xid's hold on its worker: the jobs the run loop hands over
// after its end are for the worker's next transaction.
func (p *Pool) Release(xid uint32) {
	if w := p.byXid[xid]; w != nil {
		w.busy = false
		delete(p.byXid, xid)
	}
}

// Close ends the watch and the workers: their open transactions roll back
// (the source sends them again). It returns the transactions that were
// open, in no order.
func (p *Pool) Close() []uint32 {
	open := slices.Collect(maps.Keys(p.byXid))
	if p.watch != nil {
		p.watch.stop()
	}
	for _, w := range p.workers {
		w.close()
	}
	return open
}
