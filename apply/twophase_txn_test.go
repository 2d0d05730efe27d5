package apply

import (
	"testing"

	"github.com/walapply/walapply/protocol"
)

// TestTxnMachineLonePrepare: PostgreSQL 18 sends a Prepare without Begin
// Prepare for a prepared transaction with nothing to decode; it is accepted
// between transactions, never inside one or inside a stream block.
func TestTxnMachineLonePrepare(t *testing.T) {
	lone := &protocol.Prepare{PrepareLSN: 70, EndLSN: 80, Xid: 9, GID: "lock only"}
	m := newTxnMachine()
	if ev, err := m.Step(lone); err != nil || ev != evPrepare {
		t.Fatalf("lone Prepare: %v, %v", ev, err)
	}
	if m.InTransaction() {
		t.Fatal("a lone Prepare opened a transaction")
	}
	if _, err := m.Step(&protocol.Begin{FinalLSN: 90, Xid: 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Step(lone); err == nil {
		t.Error("a Prepare inside an ordinary transaction was accepted")
	}
	m.Reset()
	if _, err := m.Step(&protocol.StreamStart{Xid: 11, FirstSegment: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Step(lone); err == nil {
		t.Error("a Prepare inside a stream block was accepted")
	}
}

// TestTwoPhaseOutcomeFolding: a two-phase step that ends a transaction in
// the same Handle as the commits Settle recorded adds to their count, so
// the FlushTracker sees one end for every Began.
func TestTwoPhaseOutcomeFolding(t *testing.T) {
	for _, tt := range []struct {
		name  string
		prior outcome
		step  func(a *applier)
		want  outcome
	}{
		{"applied alone", outcome{}, func(a *applier) { a.tpApplied(100, 0) }, outcome{Applied: true, End: 100}},
		{"applied after commits", outcome{Applied: true, End: 50, Count: 3}, func(a *applier) { a.tpApplied(100, 0) }, outcome{Applied: true, End: 100, Count: 4}},
		{"skipped alone", outcome{}, func(a *applier) { a.tpSkipped() }, outcome{Skipped: true}},
		{"skipped after commits", outcome{Applied: true, End: 50, Count: 2}, func(a *applier) { a.tpSkipped() }, outcome{Applied: true, End: 50, Count: 3}},
		{"ended alone", outcome{}, func(a *applier) { a.tpEnded() }, outcome{Ended: true}},
		{"ended after commits", outcome{Applied: true, End: 50, Count: 1}, func(a *applier) { a.tpEnded() }, outcome{Applied: true, End: 50, Count: 2}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := &applier{outcome: tt.prior}
			a.outcome.Began = true
			tt.step(a)
			tt.want.Began = true
			if a.outcome != tt.want {
				t.Errorf("outcome %+v, want %+v", a.outcome, tt.want)
			}
		})
	}
}
