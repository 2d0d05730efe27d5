package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/walapply/walapply/internal/ddl"
	"github.com/walapply/walapply/testenv"
)

// walapply ddl install and remove as a process: install twice (the
// second a no-op), remove; usage errors without an action or --source.
func TestDDLCommand(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"ddl", "--source", "host=x"}, "say what to do: walapply ddl install --source URL"},
		{[]string{"ddl", "install"}, "--source is required (or set WALAPPLY_SOURCE)"},
	} {
		if _, stderr, code := runWalapply(t, nil, tc.args...); code != 2 || !strings.Contains(stderr, tc.stderr) {
			t.Errorf("walapply %v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.stderr)
		}
	}
	if stdout, _, code := runWalapply(t, nil, "ddl", "-h"); code != 0 || !strings.Contains(stdout, "usage: walapply ddl install|remove --source URL") {
		t.Errorf("walapply ddl -h: exit %d, stdout %q", code, stdout)
	}
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		if version < 15 {
			t.Skip("the DDL capture is tested on 15 and later")
		}
		src := testenv.NewCluster(t, testenv.Options{Version: version}).ConnString("postgres")
		installed := fmt.Sprintf("DDL capture version %d installed", ddl.Version)
		for _, want := range []string{installed, installed, "DDL capture removed"} {
			action := "install"
			if strings.Contains(want, "removed") {
				action = "remove"
			}
			stdout, stderr, code := runWalapply(t, nil, "ddl", action, "--source", src)
			if code != 0 || !strings.Contains(stdout, want) {
				t.Fatalf("walapply ddl %s: exit %d, stdout %q, stderr %q", action, code, stdout, stderr)
			}
		}
	})
}
