package initcopy

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/walapply/walapply/state"
)

// TestOriginName: a copy worker's origin name, within the limit and
// distinct for long applier names.
func TestOriginName(t *testing.T) {
	if got := OriginName("bench", 2); got != "walapply_copy2_bench" {
		t.Errorf("OriginName = %q", got)
	}
	// Long names: within the limit, valid UTF-8, and distinct for names
	// that share their beginning.
	a := OriginName(strings.Repeat("é", 40)+"a", 1)
	b := OriginName(strings.Repeat("é", 40)+"b", 1)
	for _, n := range []string{a, b} {
		if len(n) > state.MaxOriginNameLen || !utf8.ValidString(n) || !strings.HasPrefix(n, "walapply_copy1_") {
			t.Errorf("OriginName of a long name = %q (%d bytes)", n, len(n))
		}
	}
	if a == b {
		t.Errorf("two long names share the origin name %q", a)
	}
}

// TestIsOriginOf: only the names OriginName gives an applier's workers
// are its copy origins.
func TestIsOriginOf(t *testing.T) {
	long := strings.Repeat("é", 40) + "a"
	for _, tc := range []struct {
		applier, origin string
		want            bool
	}{
		{"app", "walapply_copy1_app", true},
		{"app", "walapply_copy17_app", true},
		{"app", "walapply_copy1_app_x", false}, // applier app_x's
		{"app_x", "walapply_copy1_app_x", true},
		{"app", "walapply_copy01_app", false},
		{"app", "walapply_copy0_app", false},
		{"app", "walapply_app", false},
		{"app", "walapply_copy_app", false},
		{long, OriginName(long, 3), true},
		{long, OriginName(strings.Repeat("é", 40)+"b", 3), false},
	} {
		if got := IsOriginOf(tc.applier, tc.origin); got != tc.want {
			t.Errorf("IsOriginOf(%q, %q) = %v, want %v", tc.applier, tc.origin, got, tc.want)
		}
	}
}
