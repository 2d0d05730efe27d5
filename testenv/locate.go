package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// EnvSkipMissing names the environment variable that, set to 1 (or true),
// makes NewCluster and NewPair skip the test, with the reason, when a
// version's server cannot be found or fetched, instead of failing it; see
// Options.SkipMissing.
const EnvSkipMissing = "WALAPPLY_TESTENV_SKIP_MISSING"

// ErrServerMissing is returned (wrapped) by BinDir, Start and so on when no
// server of the version is installed where testenv looks and none can be
// fetched (no npm): something to install, not a failure of the code under
// test.
var ErrServerMissing = errors.New("testenv: PostgreSQL server not found")

// EnvBinDir returns the name of the environment variable that points
// testenv at the bin directory of a major version's server (initdb, pg_ctl,
// postgres): WALAPPLY_PG15_BIN, ..., WALAPPLY_PG18_BIN. Set, it is used and
// nothing else; its postgres must report that major version.
func EnvBinDir(version int) string { return fmt.Sprintf("WALAPPLY_PG%d_BIN", version) }

// locateInstalled finds an installed server of a major version, in order:
// the EnvBinDir variable; /usr/lib/postgresql/<version>/bin (Debian's and
// the PostgreSQL apt repository's packages); the bindir of a pg_config on
// PATH, then a postgres on PATH, either only if of that version. ok is false
// when none is (BinDir then fetches 16-18). err is for a variable that
// points at no server of the version.
func locateInstalled(version int) (dir string, ok bool, err error) {
	env := EnvBinDir(version)
	if d := os.Getenv(env); d != "" {
		abs, err := filepath.Abs(d)
		if err != nil {
			return "", false, fmt.Errorf("testenv: %s=%q: %w", env, d, err)
		}
		if err := checkBinDir(abs, version); err != nil {
			return "", false, fmt.Errorf("testenv: %s=%q holds no PostgreSQL %d server: %w", env, d, version, err)
		}
		return abs, true, nil
	}
	if d := fmt.Sprintf("/usr/lib/postgresql/%d/bin", version); isExecutable(filepath.Join(d, "postgres")) {
		return d, true, nil
	}
	for _, d := range pathBinDirs() {
		if checkBinDir(d, version) == nil {
			return d, true, nil
		}
	}
	return "", false, nil
}

// pathBinDirs are the candidate bin directories PATH offers, in PATH's
// order: for each of its directories, the bindir of a pg_config there, then
// the directory of a postgres there.
func pathBinDirs() []string {
	var dirs []string
	add := func(d string) {
		if d != "" && !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		if d == "" {
			continue
		}
		if abs, err := filepath.Abs(d); err == nil {
			d = abs
		}
		if pc := filepath.Join(d, "pg_config"); isExecutable(pc) {
			if out, err := exec.Command(pc, "--bindir").Output(); err == nil {
				add(strings.TrimSpace(string(out)))
			}
		}
		if pg := filepath.Join(d, "postgres"); isExecutable(pg) {
			// A symlink (/usr/local/bin/postgres → the real bin
			// directory): the real directory, where initdb finds the
			// share files next to it.
			if real, err := filepath.EvalSymlinks(pg); err == nil {
				pg = real
			}
			add(filepath.Dir(pg))
		}
	}
	return dirs
}

// checkedBinDirs remembers checkBinDir's answers, so that each postgres
// --version runs once per process and directory.
var checkedBinDirs sync.Map // "<version>\x00<dir>" → error (nil: accepted)

// checkBinDir checks that dir holds initdb, pg_ctl and a postgres of the
// major version.
func checkBinDir(dir string, version int) error {
	key := fmt.Sprintf("%d\x00%s", version, dir)
	if v, ok := checkedBinDirs.Load(key); ok {
		err, _ := v.(error)
		return err
	}
	var err error
	for _, p := range []string{"postgres", "initdb", "pg_ctl"} {
		if !isExecutable(filepath.Join(dir, p)) && err == nil {
			err = fmt.Errorf("no executable %s in %s", p, dir)
		}
	}
	if err == nil {
		err = checkServerVersion(filepath.Join(dir, "postgres"), version)
	}
	checkedBinDirs.Store(key, err)
	return err
}

// missingServer is the error of a version found nowhere: what was looked
// at and how to provide it.
func missingServer(version int, how string) error {
	return fmt.Errorf("%w: no PostgreSQL %d in $%s, /usr/lib/postgresql/%d/bin or on PATH (pg_config, postgres); %s, or set %s to its bin directory",
		ErrServerMissing, version, EnvBinDir(version), version, how, EnvBinDir(version))
}

// skipMissing skips tb when err says a server is missing (or cannot run on
// this platform) and skipping is asked for (opt, or EnvSkipMissing).
func skipMissing(tb testing.TB, opt bool, err error) {
	tb.Helper()
	if !opt {
		switch strings.ToLower(os.Getenv(EnvSkipMissing)) {
		case "1", "true", "yes", "on":
			opt = true
		}
	}
	if opt && (errors.Is(err, ErrServerMissing) || errors.Is(err, ErrUnsupportedVersion)) {
		tb.Skipf("skipped: %v (%s or SkipMissing)", err, EnvSkipMissing)
	}
}
