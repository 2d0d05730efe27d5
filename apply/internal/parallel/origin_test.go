package parallel

import (
	"testing"

	"github.com/walapply/walapply/protocol"
)

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
