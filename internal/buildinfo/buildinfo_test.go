package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestFrom(t *testing.T) {
	for _, tc := range []struct {
		bi   debug.BuildInfo
		want string
	}{
		{debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.0"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abc"}, {Key: "vcs.modified", Value: "false"}}},
			"walapply v1.2.0 (revision 0123abc, go1.26.8)"},
		{debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abc"}, {Key: "vcs.modified", Value: "true"}}},
			"walapply (devel) (revision 0123abc-modified, go1.26.8)"},
		{debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			"walapply (devel) (revision unknown, go1.26.8)"},
	} {
		if got := From(&tc.bi).String(); got != tc.want {
			t.Errorf("From(%+v) = %q, want %q", tc.bi, got, tc.want)
		}
	}
	if in := Read(); in.GoVersion == "" || in.Version == "" || in.Revision == "" {
		t.Errorf("Read() = %+v: a field is empty", in)
	}
}
