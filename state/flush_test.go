package state

import (
	"math/rand/v2"
	"testing"

	"github.com/walapply/walapply/protocol"
)

// step is one event fed to a FlushTracker, followed by a check of Feedback.
type step struct {
	op  string // received, begin, applied, end, skipped, durable, restart
	lsn protocol.LSN

	// Expected Feedback after the step.
	write, flush, apply protocol.LSN
	needsCheck          bool
}

func runStep(t *testing.T, tr *FlushTracker, s step) {
	t.Helper()
	switch s.op {
	case "received":
		tr.Received(s.lsn)
	case "begin":
		tr.BeginTxn()
	case "applied":
		tr.Applied(s.lsn)
	case "end":
		tr.EndTxn()
	case "skipped":
		tr.SkippedTxn()
	case "durable":
		tr.Durable(s.lsn)
	case "restart":
		tr.Restart(s.lsn)
	default:
		t.Fatalf("unknown op %q", s.op)
	}
}

func TestFlushTracker(t *testing.T) {
	tests := []struct {
		name  string
		start protocol.LSN
		steps []step
	}{
		{
			name:  "idle at start confirms the start",
			start: 100,
			steps: []step{
				{op: "received", lsn: 100, write: 100, flush: 100, apply: 100},
			},
		},
		{
			name:  "idle keepalive moves all three to received",
			start: 100,
			steps: []step{
				{op: "received", lsn: 500, write: 500, flush: 500, apply: 500},
			},
		},
		{
			name:  "in progress: flush stays at durable, apply at last applied",
			start: 100,
			steps: []step{
				{op: "begin", write: 100, flush: 100, apply: 100},
				{op: "received", lsn: 150, write: 150, flush: 100, apply: 100},
				{op: "received", lsn: 200, write: 200, flush: 100, apply: 100},
			},
		},
		{
			name:  "applied but not durable holds flush, apply moves to end",
			start: 100,
			steps: []step{
				{op: "begin", write: 100, flush: 100, apply: 100},
				{op: "received", lsn: 200, write: 200, flush: 100, apply: 100},
				{op: "applied", lsn: 210, write: 210, flush: 100, apply: 210, needsCheck: true},
				// A keepalive past the commit: still not durable, so neither
				// flush nor apply may jump to received.
				{op: "received", lsn: 300, write: 300, flush: 100, apply: 210, needsCheck: true},
			},
		},
		{
			name:  "durable up to the last applied and idle: flush = received",
			start: 100,
			steps: []step{
				{op: "begin", write: 100, flush: 100, apply: 100},
				{op: "received", lsn: 200, write: 200, flush: 100, apply: 100},
				{op: "applied", lsn: 200, write: 200, flush: 100, apply: 200, needsCheck: true},
				{op: "received", lsn: 300, write: 300, flush: 100, apply: 200, needsCheck: true},
				{op: "durable", lsn: 200, write: 300, flush: 300, apply: 300},
			},
		},
		{
			name:  "durable in the middle of several applied commits",
			start: 100,
			steps: []step{
				{op: "begin", write: 100, flush: 100, apply: 100},
				{op: "received", lsn: 200, write: 200, flush: 100, apply: 100},
				{op: "applied", lsn: 200, write: 200, flush: 100, apply: 200, needsCheck: true},
				{op: "begin", write: 200, flush: 100, apply: 200, needsCheck: true},
				{op: "received", lsn: 300, write: 300, flush: 100, apply: 200, needsCheck: true},
				{op: "applied", lsn: 300, write: 300, flush: 100, apply: 300, needsCheck: true},
				{op: "durable", lsn: 200, write: 300, flush: 200, apply: 300, needsCheck: true},
				{op: "durable", lsn: 300, write: 300, flush: 300, apply: 300},
			},
		},
		{
			name:  "durable while the next transaction is in progress: flush = durable, not received",
			start: 100,
			steps: []step{
				{op: "begin", write: 100, flush: 100, apply: 100},
				{op: "applied", lsn: 200, write: 200, flush: 100, apply: 200, needsCheck: true},
				{op: "begin", write: 200, flush: 100, apply: 200, needsCheck: true},
				{op: "received", lsn: 260, write: 260, flush: 100, apply: 200, needsCheck: true},
				{op: "durable", lsn: 200, write: 260, flush: 200, apply: 200},
				{op: "applied", lsn: 300, write: 300, flush: 200, apply: 300, needsCheck: true},
			},
		},
		{
			name:  "pipelined: the first commit acknowledged while the second is in flight",
			start: 100,
			steps: []step{
				{op: "begin", write: 100, flush: 100, apply: 100},
				{op: "received", lsn: 200, write: 200, flush: 100, apply: 100},
				{op: "begin", write: 200, flush: 100, apply: 100},
				// The second transaction's commit is received but not yet
				// acknowledged by the target.
				{op: "received", lsn: 300, write: 300, flush: 100, apply: 100},
				{op: "applied", lsn: 200, write: 300, flush: 100, apply: 200, needsCheck: true},
				{op: "durable", lsn: 200, write: 300, flush: 200, apply: 200},
				{op: "applied", lsn: 300, write: 300, flush: 200, apply: 300, needsCheck: true},
				{op: "durable", lsn: 300, write: 300, flush: 300, apply: 300},
			},
		},
		{
			name:  "group commit: one target commit for two source transactions",
			start: 100,
			steps: []step{
				{op: "begin", write: 100, flush: 100, apply: 100},
				{op: "received", lsn: 200, write: 200, flush: 100, apply: 100},
				{op: "begin", write: 200, flush: 100, apply: 100},
				{op: "received", lsn: 300, write: 300, flush: 100, apply: 100},
				{op: "applied", lsn: 200, write: 300, flush: 100, apply: 200, needsCheck: true},
				{op: "applied", lsn: 300, write: 300, flush: 100, apply: 300, needsCheck: true},
				{op: "durable", lsn: 300, write: 300, flush: 300, apply: 300},
			},
		},
		{
			name:  "skipped transaction (applied before a restart) confirms received when idle",
			start: 500,
			steps: []step{
				{op: "begin", write: 500, flush: 500, apply: 500},
				{op: "received", lsn: 450, write: 500, flush: 500, apply: 500},
				{op: "skipped", write: 500, flush: 500, apply: 500},
				{op: "begin", write: 500, flush: 500, apply: 500},
				{op: "received", lsn: 600, write: 600, flush: 500, apply: 500},
				{op: "skipped", write: 600, flush: 600, apply: 600},
			},
		},
		{
			name:  "empty transaction ends without a commit",
			start: 100,
			steps: []step{
				{op: "begin", write: 100, flush: 100, apply: 100},
				{op: "received", lsn: 200, write: 200, flush: 100, apply: 100},
				{op: "end", write: 200, flush: 200, apply: 200},
			},
		},
		{
			name:  "ended transaction while an applied one is not durable: flush waits",
			start: 100,
			steps: []step{
				{op: "begin", write: 100, flush: 100, apply: 100},
				{op: "applied", lsn: 200, write: 200, flush: 100, apply: 200, needsCheck: true},
				{op: "begin", write: 200, flush: 100, apply: 200, needsCheck: true},
				{op: "received", lsn: 300, write: 300, flush: 100, apply: 200, needsCheck: true},
				{op: "end", write: 300, flush: 100, apply: 200, needsCheck: true},
				{op: "durable", lsn: 200, write: 300, flush: 300, apply: 300},
			},
		},
		{
			name:  "streamed chunks do not hold flush back",
			start: 100,
			steps: []step{
				// Stream Start … Stream Stop: only Received.
				{op: "received", lsn: 150, write: 150, flush: 150, apply: 150},
				{op: "received", lsn: 400, write: 400, flush: 400, apply: 400},
				// Stream Commit: the replay starts, then the target commits.
				{op: "begin", write: 400, flush: 400, apply: 400},
				{op: "received", lsn: 450, write: 450, flush: 400, apply: 400},
				{op: "applied", lsn: 460, write: 460, flush: 400, apply: 460, needsCheck: true},
				{op: "durable", lsn: 460, write: 460, flush: 460, apply: 460},
			},
		},
		{
			name:  "commit end past the received bytes lifts write",
			start: 100,
			steps: []step{
				{op: "begin", write: 100, flush: 100, apply: 100},
				{op: "received", lsn: 180, write: 180, flush: 100, apply: 100},
				{op: "applied", lsn: 230, write: 230, flush: 100, apply: 230, needsCheck: true},
			},
		},
		{
			name:  "monotonic: a lower received or durable changes nothing",
			start: 100,
			steps: []step{
				{op: "received", lsn: 400, write: 400, flush: 400, apply: 400},
				{op: "received", lsn: 300, write: 400, flush: 400, apply: 400},
				{op: "durable", lsn: 50, write: 400, flush: 400, apply: 400},
			},
		},
		{
			name:  "monotonic: a transaction starting after an idle confirm keeps flush and apply",
			start: 100,
			steps: []step{
				{op: "received", lsn: 400, write: 400, flush: 400, apply: 400},
				{op: "begin", write: 400, flush: 400, apply: 400},
				{op: "received", lsn: 500, write: 500, flush: 400, apply: 400},
				{op: "applied", lsn: 500, write: 500, flush: 400, apply: 500, needsCheck: true},
			},
		},
		{
			name:  "durable from an earlier run counts as applied",
			start: 100,
			steps: []step{
				{op: "durable", lsn: 300, write: 300, flush: 300, apply: 300},
			},
		},
		{
			name:  "restart rolls back the transaction in progress and forgets received data",
			start: 100,
			steps: []step{
				{op: "begin", write: 100, flush: 100, apply: 100},
				// The commit is received but the target connection fails before
				// it is acknowledged.
				{op: "received", lsn: 300, write: 300, flush: 100, apply: 100},
				{op: "restart", lsn: 100, write: 300, flush: 100, apply: 100},
				// A keepalive below the lost commit end: confirming it is safe.
				{op: "received", lsn: 250, write: 300, flush: 250, apply: 250},
				// The transaction is sent again; 300 is confirmed only after
				// its commit is durable.
				{op: "begin", write: 300, flush: 250, apply: 250},
				{op: "received", lsn: 300, write: 300, flush: 250, apply: 250},
				{op: "applied", lsn: 300, write: 300, flush: 250, apply: 300, needsCheck: true},
				{op: "durable", lsn: 300, write: 300, flush: 300, apply: 300},
			},
		},
		{
			name:  "restart at a progress not yet durable needs a durable check",
			start: 100,
			steps: []step{
				{op: "begin", write: 100, flush: 100, apply: 100},
				{op: "applied", lsn: 200, write: 200, flush: 100, apply: 200, needsCheck: true},
				{op: "restart", lsn: 200, write: 200, flush: 100, apply: 200, needsCheck: true},
				{op: "durable", lsn: 200, write: 200, flush: 200, apply: 200},
			},
		},
		{
			name:  "unbalanced end does not make a later transaction look idle",
			start: 100,
			steps: []step{
				{op: "end", write: 100, flush: 100, apply: 100},
				{op: "begin", write: 100, flush: 100, apply: 100},
				{op: "received", lsn: 200, write: 200, flush: 100, apply: 100},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewFlushTracker(tt.start)
			for i, s := range tt.steps {
				runStep(t, tr, s)
				w, f, a := tr.Feedback()
				if w != s.write || f != s.flush || a != s.apply {
					t.Fatalf("step %d (%s %d): Feedback() = (write %d, flush %d, apply %d), want (%d, %d, %d)",
						i, s.op, s.lsn, w, f, a, s.write, s.flush, s.apply)
				}
				if got := tr.NeedsDurableCheck(); got != s.needsCheck {
					t.Fatalf("step %d (%s %d): NeedsDurableCheck() = %v, want %v", i, s.op, s.lsn, got, s.needsCheck)
				}
			}
		})
	}
}

// TestFlushTrackerRandom drives the tracker with random but well-formed
// streams (transactions applied in order, pipelined and grouped, durability
// lagging, restarts after target crashes) and checks the invariants after
// every event against a model that knows which commits are durable:
//
//   - flush never exceeds the end LSN of an applied-but-not-durable commit, nor
//     of a transaction in progress whose data was received;
//   - write >= apply >= flush;
//   - no reported position ever moves backwards.
func TestFlushTrackerRandom(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0x5eed))
		var (
			pos       = protocol.LSN(1000)
			tr        = NewFlushTracker(pos)
			inflight  []protocol.LSN // end LSNs received, target commit not acknowledged
			committed []protocol.LSN // acknowledged, not known durable (in order)
			durable   = pos
			lastW     protocol.LSN
			lastF     protocol.LSN
			lastA     protocol.LSN
		)
		check := func(event string) {
			t.Helper()
			w, f, a := tr.Feedback()
			if w < lastW || f < lastF || a < lastA {
				t.Fatalf("seed %d after %s: feedback went backwards: (%d,%d,%d) after (%d,%d,%d)", seed, event, w, f, a, lastW, lastF, lastA)
			}
			lastW, lastF, lastA = w, f, a
			if w < a || a < f {
				t.Fatalf("seed %d after %s: want write >= apply >= flush, got (%d,%d,%d)", seed, event, w, f, a)
			}
			for _, end := range append(append([]protocol.LSN{}, inflight...), committed...) {
				if f >= end {
					t.Fatalf("seed %d after %s: flush %d confirms commit ending at %d that is not durable (durable %d)", seed, event, f, end, durable)
				}
			}
		}
		for i := 0; i < 300; i++ {
			switch r := rng.IntN(10); {
			case r < 3: // a whole source transaction arrives
				tr.BeginTxn()
				n := 1 + rng.IntN(4)
				for j := 0; j < n; j++ {
					pos += protocol.LSN(1 + rng.IntN(100))
					tr.Received(pos)
					check("received")
				}
				pos += protocol.LSN(1 + rng.IntN(50)) // commit end beyond the bytes
				inflight = append(inflight, pos)
				tr.Received(pos - protocol.LSN(rng.IntN(20)))
				check("commit received")
			case r < 5: // the target acknowledges the oldest commits in flight
				for k := rng.IntN(len(inflight) + 1); k > 0; k-- {
					tr.Applied(inflight[0])
					committed = append(committed, inflight[0])
					inflight = inflight[1:]
					check("applied")
				}
			case r < 7: // a durable check returns a prefix of the commits
				k := rng.IntN(len(committed) + 1)
				if k > 0 {
					durable = committed[k-1]
					committed = committed[k:]
				}
				tr.Durable(durable)
				check("durable")
			case r < 8: // keepalive, or a streamed chunk
				pos += protocol.LSN(rng.IntN(100))
				tr.Received(pos)
				check("keepalive")
			case r < 9: // an empty or skipped transaction
				if len(inflight) == 0 {
					tr.BeginTxn()
					pos += protocol.LSN(1 + rng.IntN(30))
					tr.Received(pos)
					check("empty txn data")
					tr.EndTxn()
					check("empty txn end")
				}
			default: // the target crashes: what is not durable is lost
				inflight, committed = nil, nil
				pos = max(pos, durable)
				tr.Restart(durable)
				check("restart")
			}
		}
	}
}
