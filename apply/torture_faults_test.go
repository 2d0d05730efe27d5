//go:build linux

package apply_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/walapply/walapply/internal/faultproxy"
)

// The fault kinds of the torture test.
const (
	faultKillApplier     = "kill-applier"      // SIGKILL of the walapply process, then a new one
	faultStopTarget      = "stop-target"       // immediate shutdown of the target (a crash), then a start
	faultStopSource      = "stop-source"       // immediate shutdown of the source, then a start
	faultCutSource       = "cut-source"        // applier-source connections reset, reconnects refused for a while
	faultCutTarget       = "cut-target"        // the same between the applier and the target
	faultHalfCloseSource = "half-close-source" // a FIN in one direction of the applier-source connections
	faultHalfCloseTarget = "half-close-target" // the same for the applier-target connections
	faultStallSource     = "stall-source"      // nothing forwarded to or from the source for longer than wal_sender_timeout
	faultStallTarget     = "stall-target"      // nothing forwarded to or from the target for as long
	faultSpillDisk       = "spill-disk"        // writes to spill files fail (EFBIG) for a while
)

var faultKinds = []string{faultKillApplier, faultStopTarget, faultStopSource, faultCutSource, faultCutTarget,
	faultHalfCloseSource, faultHalfCloseTarget, faultStallSource, faultStallTarget, faultSpillDisk}

// tortureFaults injects the faults: in rounds, each a random order of every
// kind, so that a short run has each kind at least once and a long one a
// like number of each; durations and directions are random.
type tortureFaults struct {
	t        *testing.T
	h        *harness
	p        *tortureApplier
	src, tgt *faultproxy.Proxy
	rng      *rand.Rand
	// stall is how long a stall lasts at least: longer than the source's
	// wal_sender_timeout.
	stall time.Duration

	round     []string
	counts    map[string]int
	spillHits int // spill-disk faults during which the applier hit the error
}

func (f *tortureFaults) next() string {
	if len(f.round) == 0 {
		f.round = slices.Clone(faultKinds)
		f.rng.Shuffle(len(f.round), func(i, j int) { f.round[i], f.round[j] = f.round[j], f.round[i] })
	}
	k := f.round[0]
	f.round = f.round[1:]
	return k
}

// loop injects faults, with random pauses, until the workload has ended,
// at least min faults were injected, and the applier has applied what the
// workload wrote (drained, asked only after the workload ended) or limit
// has passed since: the applier works under fire all along, also while it
// catches up. It fails the test if the applier stops by itself. It returns
// the number of faults, and how many came after the workload ended.
func (f *tortureFaults) loop(workload <-chan error, min int, drained func() bool, limit time.Duration) (n, after int) {
	f.t.Helper()
	var endedAt time.Time
	for {
		if endedAt.IsZero() {
			select {
			case err := <-workload:
				if err != nil {
					f.t.Fatal(err)
				}
				endedAt = time.Now()
				continue
			case <-time.After(time.Duration(300+f.rng.IntN(1500)) * time.Millisecond):
			}
		} else {
			if n >= min && (drained() || time.Since(endedAt) > limit) {
				return n, after
			}
			time.Sleep(time.Duration(300+f.rng.IntN(1500)) * time.Millisecond)
			after++
		}
		f.checkAlive()
		f.inject(f.next())
		n++
		f.checkAlive()
	}
}

func (f *tortureFaults) checkAlive() {
	f.t.Helper()
	if err := f.p.exited(); err != nil {
		f.t.Fatalf("%v; a fault must never stop it", err)
	}
}

// inject runs one fault to its end: when it returns, the servers run and
// the proxies forward again (the applier may still be reconnecting).
func (f *tortureFaults) inject(kind string) {
	f.t.Helper()
	ctx := context.Background()
	f.counts[kind]++
	pause := func(max int) { time.Sleep(time.Duration(f.rng.IntN(max)) * time.Millisecond) }
	switch kind {
	case faultKillApplier:
		f.p.kill()
		f.p.start()
	case faultStopTarget, faultStopSource:
		c := f.h.pair.Target
		if kind == faultStopSource {
			c = f.h.pair.Source
		}
		if err := c.StopImmediate(ctx); err != nil {
			f.t.Fatal(err)
		}
		pause(1000)
		if err := c.Start(ctx); err != nil {
			f.t.Fatal(err)
		}
	case faultCutSource, faultCutTarget:
		px := f.src
		if kind == faultCutTarget {
			px = f.tgt
		}
		d := time.Duration(100+f.rng.IntN(2000)) * time.Millisecond
		px.Cut(d)
		time.Sleep(d)
	case faultHalfCloseSource, faultHalfCloseTarget:
		px := f.src
		if kind == faultHalfCloseTarget {
			px = f.tgt
		}
		px.HalfClose(faultproxy.Direction(f.rng.IntN(2)))
	case faultStallSource, faultStallTarget:
		px := f.src
		if kind == faultStallTarget {
			px = f.tgt
		}
		d := f.stall + time.Duration(f.rng.IntN(1500))*time.Millisecond
		px.Stall(d)
		time.Sleep(d)
	case faultSpillDisk:
		f.spillDisk()
	default:
		f.t.Fatalf("unknown fault %q", kind)
	}
}

// spillDisk limits the applier's file size to a few kB (a full disk under
// the spill directory, seen as EFBIG), waits a while for a streamed
// transaction to run into it, and lifts the limit.
func (f *tortureFaults) spillDisk() {
	f.t.Helper()
	before := f.p.log.count("file too large")
	if err := f.p.limitFileSize(uint64(f.rng.IntN(128<<10)), false); err != nil {
		f.t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for f.p.log.count("file too large") == before && time.Now().Before(deadline) {
		if f.p.exited() != nil {
			break // checkAlive reports it
		}
		time.Sleep(50 * time.Millisecond)
	}
	if f.p.log.count("file too large") > before {
		f.spillHits++
	}
	if f.p.proc != nil {
		if err := f.p.limitFileSize(0, true); err != nil {
			f.t.Fatal(err)
		}
	}
}

// summary lists the faults per kind.
func (f *tortureFaults) summary() string {
	var b strings.Builder
	total := 0
	for _, k := range faultKinds {
		total += f.counts[k]
	}
	fmt.Fprintf(&b, "%d faults:", total)
	for i, k := range faultKinds {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, " %s %d", k, f.counts[k])
	}
	fmt.Fprintf(&b, " (spill-disk faults that hit a spill write: %d of %d)", f.spillHits, f.counts[faultSpillDisk])
	return b.String()
}
