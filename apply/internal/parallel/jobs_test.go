package parallel

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
)

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

// TestAddAllocs: handing a stream block's messages to a worker allocates
// nothing once its chunks are warm (the free list reuses them), as chunk
// says. A run is a chunk's worth of messages, since AllocsPerRun rounds
// down: an allocation per chunk would not show per message.
func TestAddAllocs(t *testing.T) {
	w := &Worker{jobs: make(chan job, workerQueue), free: make(chan *chunk, workerQueue+2)}
	msg := bytes.Repeat([]byte("m"), 100)
	chunkful := func() {
		for range chunkMessages {
			w.Add(msg, 7)
			for len(w.jobs) > 0 {
				w.recycle((<-w.jobs).chunk)
			}
		}
	}
	chunkful() // warm: a chunk grown to its bounds
	if n := testing.AllocsPerRun(20, chunkful); n != 0 {
		t.Errorf("%v allocations per chunk of messages handed over, want 0", n)
	}
}
