package parallel

import (
	"slices"
	"testing"
)

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
