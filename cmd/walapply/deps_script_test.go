package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDepsScriptSaysWhatToInstall: scripts/deps.sh, which `make demo` and
// .ci/run use, installs nothing without root and says in one line what to
// install instead, exiting 1; with everything present it does nothing and
// exits 0. apt-get is never run (a shim on PATH fails the test if it is).
func TestDepsScriptSaysWhatToInstall(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	script, err := filepath.Abs("../../scripts/deps.sh")
	if err != nil {
		t.Fatal(err)
	}
	// A PATH of shims: id says a user other than root, apt-get and sudo
	// record that they were run; npm and make are there only when asked.
	bin := t.TempDir()
	ran := filepath.Join(t.TempDir(), "ran")
	shim := func(name, body string) {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!"+bash+"\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	shim("id", "echo 1000")
	shim("apt-get", "echo apt-get >> "+ran+"; exit 1")
	shim("sudo", "echo sudo >> "+ran+"; exit 1")
	run := func() (string, int) {
		t.Helper()
		cmd := exec.Command(bash, script, "npm", "make")
		cmd.Env = []string{"PATH=" + bin}
		out, err := cmd.CombinedOutput()
		code := 0
		if ee := (*exec.ExitError)(nil); err != nil {
			if !errors.As(err, &ee) {
				t.Fatalf("running deps.sh: %v", err)
			}
			code = ee.ExitCode()
		}
		return string(out), code
	}
	out, code := run()
	want := "missing: install npm make (as root: apt-get install npm make), or run this as root to have it installed\n"
	if code != 1 || out != want {
		t.Errorf("deps.sh npm make, neither present, not root: exit %d, output %q; want exit 1 and %q", code, out, want)
	}
	shim("npm", "exit 0")
	shim("make", "exit 0")
	if out, code := run(); code != 0 || out != "" {
		t.Errorf("deps.sh npm make, both present: exit %d, output %q; want exit 0 and nothing", code, out)
	}
	if b, err := os.ReadFile(ran); err == nil {
		t.Errorf("deps.sh ran %s without root", strings.TrimSpace(string(b)))
	}
}
