package engine

import "testing"

// TestOutcomeFolding: a two-phase step that ends a transaction in the same
// step as the commits Settle recorded adds to their count, so the
// FlushTracker sees one end for every Began.
func TestOutcomeFolding(t *testing.T) {
	for _, tt := range []struct {
		name  string
		prior Outcome
		step  func(o *Outcome)
		want  Outcome
	}{
		{"applied alone", Outcome{}, func(o *Outcome) { o.FoldApplied(100) }, Outcome{Applied: true, End: 100}},
		{"applied after commits", Outcome{Applied: true, End: 50, Count: 3}, func(o *Outcome) { o.FoldApplied(100) }, Outcome{Applied: true, End: 100, Count: 4}},
		{"skipped alone", Outcome{}, func(o *Outcome) { o.FoldSkipped() }, Outcome{Skipped: true}},
		{"skipped after commits", Outcome{Applied: true, End: 50, Count: 2}, func(o *Outcome) { o.FoldSkipped() }, Outcome{Applied: true, End: 50, Count: 3}},
		{"ended alone", Outcome{}, func(o *Outcome) { o.FoldEnded() }, Outcome{Ended: true}},
		{"ended after commits", Outcome{Applied: true, End: 50, Count: 1}, func(o *Outcome) { o.FoldEnded() }, Outcome{Applied: true, End: 50, Count: 2}},
		{"a commit", Outcome{}, func(o *Outcome) { o.NoteApplied(70) }, Outcome{Applied: true, End: 70}},
		{"a skip", Outcome{}, func(o *Outcome) { o.NoteSkipped() }, Outcome{Skipped: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.prior
			o.Began = true
			tt.step(&o)
			tt.want.Began = true
			if o != tt.want {
				t.Errorf("outcome %+v, want %+v", o, tt.want)
			}
		})
	}
}
