package parallel

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestPoolTake: a new streamed transaction takes an idle worker, the pool
// opens workers up to its size, a failed worker is not taken again, a
// transaction that finds none (or whose worker cannot connect) gets none
// and is spilled, and Close reports the transactions still open.
func TestPoolTake(t *testing.T) {
	ctx := context.Background()
	d := &fakeDialer{}
	p := New(Options{Size: 2, MinRun: 64, Dial: d}, nil)
	take := func(xid uint32) int {
		t.Helper()
		w, err := p.Take(ctx, xid)
		if err != nil {
			t.Fatalf("Take(%d): %v", xid, err)
		}
		if w == nil {
			return 0
		}
		if p.Of(xid) != w {
			t.Errorf("Of(%d) is not the worker Take gave it", xid)
		}
		return w.ID()
	}
	for _, step := range []struct {
		xid     uint32
		release uint32 // released before xid takes a worker
		fail    int    // the worker failed before
		want    int    // the worker taken, 0 none
	}{
		{xid: 1, want: 1},
		{xid: 2, want: 2},
		{xid: 3, want: 0}, // both busy, the pool full: spilled
		{xid: 4, release: 1, want: 1},
		{xid: 5, release: 2, fail: 2, want: 0}, // 2 is idle but failed
		{xid: 6, release: 4, want: 1},
	} {
		if step.release != 0 {
			p.Release(step.release)
			if p.Of(step.release) != nil {
				t.Errorf("Of(%d) after its release", step.release)
			}
		}
		if step.fail != 0 {
			p.workers[step.fail-1].fail(errors.New("lost"))
		}
		if got := take(step.xid); got != step.want {
			t.Errorf("transaction %d took worker %d, want %d", step.xid, got, step.want)
		}
	}
	if len(d.apps) != 2 {
		t.Errorf("%d workers opened, want 2", len(d.apps))
	}
	open := p.Close()
	slices.Sort(open)
	if !slices.Equal(open, []uint32{6}) {
		t.Errorf("Close: open transactions %v, want [6]", open)
	}
	for i, f := range d.apps {
		if !f.closed {
			t.Errorf("worker %d's connection not closed", i+1)
		}
	}

	d = &fakeDialer{err: errors.New("connection refused")}
	p = New(Options{Size: 2, Dial: d}, nil)
	if w, err := p.Take(ctx, 1); w != nil || err == nil || p.Of(1) != nil {
		t.Errorf("Take with a failing dial: %v, %v; want no worker and the error", w, err)
	}
	p.Close()
}

// TestCheck: a worker whose transaction failed says so as a FallbackError
// naming the transaction and the reason, the message an operator reads.
func TestCheck(t *testing.T) {
	w := &Worker{xid: 42}
	if err := w.Check(); err != nil {
		t.Fatalf("Check before a failure: %v", err)
	}
	w.fail(errors.New("duplicate key"))
	w.fail(errors.New("a later failure"))
	err := w.Check()
	var fe *FallbackError
	if !errors.As(err, &fe) || fe.Xid != 42 {
		t.Fatalf("Check: %v, want a FallbackError for 42", err)
	}
	if want := "applying streamed transaction 42 as it streamed: duplicate key; it is applied from a spill file instead"; err.Error() != want {
		t.Errorf("Check: %q, want %q", err, want)
	}
	if strings.Contains(err.Error(), "later") {
		t.Error("a later failure replaced the first")
	}
}
