package parallel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/walapply/walapply/protocol"
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

// TestChunks: the run loop hands a worker a stream block's messages in
// chunks of at most chunkMessages messages or from chunkBytes bytes, in
// order, before any other job; chunks are reused, except one a huge
// message grew.
func TestChunks(t *testing.T) {
	w := &Worker{jobs: make(chan job, 64), free: make(chan *chunk, 4)}
	var want bytes.Buffer
	for i := range chunkMessages + 88 {
		m := fmt.Sprintf("m%04d", i)
		want.WriteString(m)
		w.Add([]byte(m), uint32(i%3))
	}
	if n := len(w.jobs); n != 1 {
		t.Fatalf("%d jobs after %d small messages, want 1 full chunk", n, chunkMessages+88)
	}
	w.Idle()
	var got bytes.Buffer
	var kinds []jobKind
	var sizes []int
	for len(w.jobs) > 0 {
		j := <-w.jobs
		kinds = append(kinds, j.kind)
		if c := j.chunk; c != nil {
			sizes = append(sizes, len(c.ends))
			start := 0
			for k, end := range c.ends {
				if end-start != 5 || c.subs[k] != uint32((got.Len()/5)%3) {
					t.Fatalf("message %d: %d bytes of subtransaction %d", got.Len()/5, end-start, c.subs[k])
				}
				got.Write(c.data[start:end])
				start = end
			}
			w.recycle(c)
		}
	}
	if !slices.Equal(kinds, []jobKind{jobChanges, jobChanges, jobIdle}) || !slices.Equal(sizes, []int{chunkMessages, 88}) {
		t.Errorf("jobs %v of %v messages, want two chunks of %d and 88, then the end of the block", kinds, sizes, chunkMessages)
	}
	if got.String() != want.String() {
		t.Error("the messages changed or lost their order on the way")
	}

	// Big messages: a chunk is handed over once it holds chunkBytes.
	w = &Worker{jobs: make(chan job, 64), free: make(chan *chunk, 4)}
	big := bytes.Repeat([]byte("x"), chunkBytes/2+1)
	w.Add(big, 7)
	if len(w.jobs) != 0 {
		t.Fatal("a chunk of half chunkBytes handed over")
	}
	w.Add(big, 7)
	if len(w.jobs) != 1 {
		t.Fatal("a chunk past chunkBytes not handed over")
	}
	c := (<-w.jobs).chunk
	w.recycle(c)
	w.Add([]byte("a"), 7)
	if w.pend != c {
		t.Error("a recycled chunk was not reused")
	}
	w.pend = nil
	huge := &chunk{data: make([]byte, 0, 4*chunkBytes+1)}
	w.recycle(huge)
	w.Add([]byte("a"), 7)
	if w.pend == huge {
		t.Error("a chunk grown by a huge message was kept")
	}
}

// TestRipe: the watch ends a lock wait only when it sees the same waiter
// and holder in two rounds in a row.
func TestRipe(t *testing.T) {
	type pair = [2]uint32
	rounds := []struct {
		pairs []pair
		want  []pair
	}{
		{pairs: []pair{{1, 2}}, want: nil},                    // first seen
		{pairs: []pair{{1, 2}, {3, 2}}, want: []pair{{1, 2}}}, // seen twice
		{pairs: []pair{{3, 4}}, want: nil},                    // 3 waits for another holder now
		{pairs: nil, want: nil},
		{pairs: []pair{{3, 4}}, want: nil}, // a round without it in between
		{pairs: []pair{{3, 4}}, want: []pair{{3, 4}}},
	}
	last := map[pair]bool{}
	for i, r := range rounds {
		var ends []pair
		ends, last = ripe(last, r.pairs)
		if !slices.Equal(ends, r.want) {
			t.Errorf("round %d: ends %v, want %v", i+1, ends, r.want)
		}
	}
}

// TestFurthest: after a crash between a worker's commit and the applier's
// origin following it, the applier's origin moves up to the furthest
// worker origin, and only then.
func TestFurthest(t *testing.T) {
	for _, tc := range []struct {
		main     protocol.LSN
		origins  map[string]protocol.LSN
		want     protocol.LSN
		wantFrom string
	}{
		{main: 100, origins: nil, want: 100},
		{main: 100, origins: map[string]protocol.LSN{"walapply_par1_a": 50, "walapply_par2_a": 100}, want: 100}, // stale, or even
		{main: 100, origins: map[string]protocol.LSN{"walapply_par1_a": 150, "walapply_par2_a": 120}, want: 150, wantFrom: "walapply_par1_a"},
		{main: 0, origins: map[string]protocol.LSN{"walapply_par2_a": 10, "walapply_par1_a": 10}, want: 10, wantFrom: "walapply_par1_a"},
	} {
		got, from := Furthest(tc.main, tc.origins)
		if got != tc.want || from != tc.wantFrom {
			t.Errorf("Furthest(%s, %v) = %s, %q; want %s, %q", tc.main, tc.origins, got, from, tc.want, tc.wantFrom)
		}
	}
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
