package apply

import (
	"strings"
	"testing"
)

// TestDivergedErrorText: the refusal names both positions, both timelines,
// what the target holds and what the operator can do.
func TestDivergedErrorText(t *testing.T) {
	err := divergedError("app", "walapply_app", timelineSwitch{from: 1, to: 2, at: 0x3000000, progress: 0x3000100})
	for _, want := range []string{"0/3000100", "0/3000000", "timeline 1", "timeline 2", "never had", "--copy", "walapply drop --name app", "--allow-timeline-change"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
}
