package apply

import (
	"errors"
	"strings"
	"testing"
)

func TestResolveStreaming(t *testing.T) {
	for _, tc := range []struct {
		mode    string
		version int
		want    string
		err     string
	}{
		{"", 130012, "off", ""},
		{"", 140000, "on", ""},
		{"", 180004, "on", ""},
		{"off", 180004, "off", ""},
		{"off", 130000, "off", ""},
		{"on", 150018, "on", ""},
		{"on", 130012, "", "--streaming on needs a PostgreSQL 14 or later source (the source is 13.12); use --streaming off"},
		{"parallel", 160000, "parallel", ""},
		{"parallel", 150018, "", "--streaming parallel needs a PostgreSQL 16 or later source (the source is 15.18); use --streaming on"},
		{"parallel", 130000, "", "the source is 13.0); use --streaming off"},
	} {
		got, err := resolveStreaming(tc.mode, tc.version)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, ErrConfig) || IsTransient(err) {
				t.Errorf("resolveStreaming(%q, %d) = %q, %v; want a permanent config error containing %q", tc.mode, tc.version, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("resolveStreaming(%q, %d) = %q, %v; want %q", tc.mode, tc.version, got, err, tc.want)
		}
	}
	for _, mode := range []string{"", "off", "on", "parallel"} {
		if err := checkStreamingConfig(&Config{Streaming: mode}); err != nil {
			t.Errorf("checkStreamingConfig(%q): %v", mode, err)
		}
	}
	if err := checkStreamingConfig(&Config{Streaming: "yes"}); !errors.Is(err, ErrConfig) {
		t.Errorf("checkStreamingConfig(yes) = %v, want a config error", err)
	}
}

func TestDefaultSpillDir(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "/var/state")
	for name, want := range map[string]string{
		"replica_1":  "/var/state/walapply/replica_1/7-16384/spill",
		"a/b":        "/var/state/walapply/a%2Fb/7-16384/spill",
		"..":         "/var/state/walapply/%2E%2E/7-16384/spill",
		".":          "/var/state/walapply/%2E/7-16384/spill",
		"x.y":        "/var/state/walapply/x.y/7-16384/spill",
		"été 2":      "/var/state/walapply/%C3%A9t%C3%A9%202/7-16384/spill",
		"../../etc":  "/var/state/walapply/..%2F..%2Fetc/7-16384/spill",
		`back\slash`: "/var/state/walapply/back%5Cslash/7-16384/spill",
	} {
		got, err := defaultSpillDir(name, "7-16384")
		if err != nil || got != want {
			t.Errorf("defaultSpillDir(%q) = %q, %v; want %q", name, got, err, want)
		}
	}
	t.Setenv("XDG_STATE_HOME", "relative/ignored")
	t.Setenv("HOME", "/home/u")
	if got, err := defaultSpillDir("r", "7-16384"); err != nil || got != "/home/u/.local/state/walapply/r/7-16384/spill" {
		t.Errorf("defaultSpillDir with a relative XDG_STATE_HOME = %q, %v", got, err)
	}
}
