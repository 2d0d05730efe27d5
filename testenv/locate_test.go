package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeBinDir makes a bin directory whose postgres reports version (a
// script), with initdb and pg_ctl, and a pg_config pointing at it.
func fakeBinDir(t *testing.T, version string) string {
	t.Helper()
	dir := t.TempDir()
	scripts := map[string]string{
		"postgres":  "echo 'postgres (PostgreSQL) " + version + "'",
		"initdb":    "exit 0",
		"pg_ctl":    "exit 0",
		"pg_config": "echo " + dir,
	}
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestBinDirOverride: $WALAPPLY_PG<n>_BIN wins when it holds that version
// and is an error naming the variable when it does not; a pg_config (or
// postgres) on PATH of the version is found; a version found nowhere, with
// no npm to fetch it, is ErrServerMissing.
func TestBinDirOverride(t *testing.T) {
	fake17 := fakeBinDir(t, "17.2")
	t.Setenv(EnvBinDir(17), fake17)
	if got, err := BinDir(17); err != nil || got != fake17 {
		t.Errorf("BinDir(17) with %s set: %q, %v; want %q", EnvBinDir(17), got, err, fake17)
	}
	t.Setenv(EnvBinDir(17), fakeBinDir(t, "16.4"))
	if _, err := BinDir(17); err == nil || !strings.Contains(err.Error(), "WALAPPLY_PG17_BIN") || !strings.Contains(err.Error(), "16.4") {
		t.Errorf("BinDir(17) with a 16 in %s: %v; want an error naming the variable and what it found", EnvBinDir(17), err)
	}
	t.Setenv(EnvBinDir(17), "")

	// PATH: a pg_config of the version, and one of another version that
	// is passed over.
	onPath := fakeBinDir(t, "17.5")
	t.Setenv("PATH", fakeBinDir(t, "16.1")+string(os.PathListSeparator)+onPath)
	if got, err := BinDir(17); err != nil || got != onPath {
		t.Errorf("BinDir(17) with a 17 on PATH: %q, %v; want %q", got, err, onPath)
	}

	// Nowhere, and no npm: missing, saying what to set.
	t.Setenv("PATH", t.TempDir())
	t.Setenv(EnvCache, t.TempDir())
	_, err := BinDir(16)
	if !errors.Is(err, ErrServerMissing) || !strings.Contains(err.Error(), "npm") {
		t.Errorf("BinDir(16) with nothing installed and no npm: %v; want ErrServerMissing about npm", err)
	}
}

// TestSkipMissing: with SkipMissing (or the environment variable) a
// missing server skips the test with the reason; without, it fails.
func TestSkipMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no npm, no pg_config
	t.Setenv(EnvCache, t.TempDir())
	t.Setenv(EnvBinDir(16), "")
	for _, c := range []struct {
		name string
		opt  bool
		env  string
	}{{"option", true, ""}, {"environment", false, "1"}} {
		t.Setenv(EnvSkipMissing, c.env)
		var sub *testing.T
		t.Run(c.name, func(t *testing.T) {
			sub = t
			NewCluster(t, Options{Version: 16, SkipMissing: c.opt})
			t.Error("NewCluster returned without a server")
		})
		if !sub.Skipped() {
			t.Errorf("%s: the test was not skipped", c.name)
		}
	}
	t.Setenv(EnvSkipMissing, "")
	// Without: the error, as before (checked on skipMissing, since a
	// failing subtest would fail this test).
	ft := &fakeTB{TB: t}
	skipMissing(ft, false, fmt.Errorf("start: %w", ErrServerMissing))
	if ft.skipped != "" {
		t.Errorf("skipped without being asked: %s", ft.skipped)
	}
	skipMissing(ft, true, errors.New("initdb failed"))
	if ft.skipped != "" {
		t.Errorf("skipped for another error: %s", ft.skipped)
	}
}

// fakeTB records a skip instead of ending the goroutine.
type fakeTB struct {
	testing.TB
	skipped string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Skipf(format string, args ...any) {
	f.skipped = fmt.Sprintf(format, args...)
}
