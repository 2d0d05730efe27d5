package main

import "testing"

func TestParseSplitSize(t *testing.T) {
	for in, want := range map[string]int64{"1GB": 1 << 30, "64kB": 64 << 10, "100": 100, "3 MB": 3 << 20, "2TB": 2 << 40, "0": -1, "off": -1, "auto": 0} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "1 GiB", "-5", "x", "99999999999TB"} {
		if _, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q): no error", in)
		}
	}
}
