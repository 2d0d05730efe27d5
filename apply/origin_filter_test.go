package apply

import (
	"errors"
	"strings"
	"testing"

	"github.com/walapply/walapply/protocol"
)

func TestCheckOriginConfig(t *testing.T) {
	tests := []struct {
		in, want string
		err      bool
	}{
		{"", OriginAny, false},
		{"any", OriginAny, false},
		{"ANY", OriginAny, false},
		{"none", OriginNone, false},
		{" None ", OriginNone, false},
		{"all", "", true},
		{"walapply_a", "", true},
		{"nonE2", "", true},
	}
	for _, tc := range tests {
		cfg := Config{Origin: tc.in}
		err := checkOriginConfig(&cfg)
		if tc.err {
			if !errors.Is(err, ErrConfig) {
				t.Errorf("origin %q: error %v, want one wrapping ErrConfig", tc.in, err)
			} else if !strings.Contains(err.Error(), "want any") {
				t.Errorf("origin %q: error %q does not say what is allowed", tc.in, err)
			}
			continue
		}
		if err != nil || cfg.Origin != tc.want {
			t.Errorf("origin %q: got %q, %v; want %q", tc.in, cfg.Origin, err, tc.want)
		}
	}
}

func TestCheckOriginSupport(t *testing.T) {
	tests := []struct {
		origin  string
		version int
		refused bool
	}{
		{OriginAny, 150014, false},
		{OriginAny, 100023, false},
		{OriginNone, 160000, false},
		{OriginNone, 180004, false},
		{OriginNone, 150014, true},
		{OriginNone, 140019, true},
	}
	for _, tc := range tests {
		err := checkOriginSupport(tc.origin, tc.version)
		if !tc.refused {
			if err != nil {
				t.Errorf("origin %s on %d: unexpected error %v", tc.origin, tc.version, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("origin %s on %d: accepted, want a refusal", tc.origin, tc.version)
			continue
		}
		if IsTransient(err) {
			t.Errorf("origin %s on %d: %v is transient; retrying cannot help", tc.origin, tc.version, err)
		}
		if !errors.Is(err, protocol.ErrUnsupported) {
			t.Errorf("origin %s on %d: %v does not match protocol.ErrUnsupported", tc.origin, tc.version, err)
		}
		for _, part := range []string{"--origin none", "PostgreSQL 16", versionString(tc.version), "--origin any"} {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("origin %s on %d: error %q does not mention %q", tc.origin, tc.version, err, part)
			}
		}
	}
}

// TestIsTransientUnsupported: the protocol layer's refusal of an option the
// source is too old for stops the run instead of being retried forever.
func TestIsTransientUnsupported(t *testing.T) {
	err := &protocol.UnsupportedError{Option: `origin "none"`, Need: "PostgreSQL 16 or later", Have: "source is 15.14"}
	if IsTransient(err) {
		t.Errorf("%v is transient", err)
	}
	// Wrapped as the run loop wraps it.
	if wrapped := errors.Join(errors.New("starting replication from slot \"s\" at 0/0"), err); IsTransient(wrapped) {
		t.Errorf("%v is transient", wrapped)
	}
}
