package apply

import (
	"testing"

	"github.com/walapply/walapply/apply/internal/engine"
)

// TestTwoPhaseOutcomeFolding: a two-phase step that ends a transaction in
// the same Handle as the commits Settle recorded adds to their count, so
// the FlushTracker sees one end for every Began.
func TestTwoPhaseOutcomeFolding(t *testing.T) {
	for _, tt := range []struct {
		name  string
		prior engine.Outcome
		step  func(a *applier)
		want  engine.Outcome
	}{
		{"applied alone", engine.Outcome{}, func(a *applier) { a.tpApplied(100, 0) }, engine.Outcome{Applied: true, End: 100}},
		{"applied after commits", engine.Outcome{Applied: true, End: 50, Count: 3}, func(a *applier) { a.tpApplied(100, 0) }, engine.Outcome{Applied: true, End: 100, Count: 4}},
		{"skipped alone", engine.Outcome{}, func(a *applier) { a.tpSkipped() }, engine.Outcome{Skipped: true}},
		{"skipped after commits", engine.Outcome{Applied: true, End: 50, Count: 2}, func(a *applier) { a.tpSkipped() }, engine.Outcome{Applied: true, End: 50, Count: 3}},
		{"ended alone", engine.Outcome{}, func(a *applier) { a.tpEnded() }, engine.Outcome{Ended: true}},
		{"ended after commits", engine.Outcome{Applied: true, End: 50, Count: 1}, func(a *applier) { a.tpEnded() }, engine.Outcome{Applied: true, End: 50, Count: 2}},
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
