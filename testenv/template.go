package testenv

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// templateFormat changes whenever the initdb arguments below change, so that
// caches built by an older testenv are not reused.
const templateFormat = 1

// initdbArgs are the arguments every template is created with: superuser
// postgres, trust authentication (pg_hba.conf is rewritten per cluster
// anyway), UTF8 with the C locale so that sorting does not depend on the
// machine.
var initdbArgs = []string{"--username=postgres", "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-instructions"}

// templates memoises ensureTemplate per bin directory within the process.
var templates struct {
	sync.Mutex
	dirs map[string]string
}

// ensureTemplate returns a data directory freshly made by initdb for the
// binaries in binDir, owned by u. Clusters start from a copy of it: copying
// takes a fraction of initdb's time.
//
// Templates live in CacheDir()/templates, keyed by the binaries (path, size
// and modification time of postgres), the owner and templateFormat, so that
// every test binary of a run, and later runs, share them. Creation is
// serialised by a file lock and published by a rename of a complete tree.
func ensureTemplate(version int, binDir string, u *serverUser) (string, error) {
	templates.Lock()
	defer templates.Unlock()
	if d, ok := templates.dirs[binDir]; ok {
		return d, nil
	}
	root, err := CacheDir()
	if err != nil {
		return "", err
	}
	st, err := os.Stat(filepath.Join(binDir, "postgres"))
	if err != nil {
		return "", fmt.Errorf("testenv: %w", err)
	}
	uid := os.Geteuid()
	if u != nil {
		uid = u.uid
	}
	h := sha256.Sum256(fmt.Appendf(nil, "%d\x00%s\x00%d\x00%d\x00%d", templateFormat, binDir, st.Size(), st.ModTime().UnixNano(), uid))
	key := fmt.Sprintf("pg%d-%s", version, hex.EncodeToString(h[:6]))
	tdir := filepath.Join(root, "templates")
	dir := filepath.Join(tdir, key)

	if _, err := os.Stat(filepath.Join(dir, "PG_VERSION")); err != nil {
		if err := buildTemplate(binDir, tdir, key, u); err != nil {
			return "", fmt.Errorf("testenv: creating the PostgreSQL %d template: %w", version, err)
		}
	}
	if templates.dirs == nil {
		templates.dirs = make(map[string]string)
	}
	templates.dirs[binDir] = dir
	return dir, nil
}

// buildTemplate runs initdb into a staging directory below tdir and renames
// it to tdir/key, unless another process did so while we waited for the lock.
func buildTemplate(binDir, tdir, key string, u *serverUser) error {
	if err := mkdirAll(tdir); err != nil {
		return err
	}
	unlock, err := lockFile(filepath.Join(tdir, key+".lock"))
	if err != nil {
		return err
	}
	defer unlock()
	dir := filepath.Join(tdir, key)
	if _, err := os.Stat(filepath.Join(dir, "PG_VERSION")); err == nil {
		return nil
	}
	// Holding the lock, any staging directory for this key is the leftover
	// of an interrupted initdb.
	old, _ := filepath.Glob(filepath.Join(tdir, key+".tmp-*"))
	for _, o := range old {
		_ = os.RemoveAll(o)
	}
	stage, err := os.MkdirTemp(tdir, key+".tmp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(stage)
	if err := u.chown(stage); err != nil {
		return err
	}
	// initdb fsyncs its output, so the template is durable before the rename.
	args := append([]string{"--pgdata=" + stage}, initdbArgs...)
	if out, err := runServerProgram(u, stage, filepath.Join(binDir, "initdb"), args...); err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, out)
	}
	if err := os.Rename(stage, dir); err != nil {
		return err
	}
	// Make the rename itself durable.
	if d, err := os.Open(tdir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// copyTree copies the data directory src to dst (which must not exist),
// keeping permissions and ownership (we are root or the owner). On Linux
// io.Copy between files uses copy_file_range, which stays in the kernel and
// shares blocks on file systems that support it.
func copyTree(src, dst string) error {
	return copyTreeSkipping(src, dst, nil)
}

// copyTreeSkipping is copyTree leaving out the files and directories (with
// their contents) for whose path relative to src skip is true.
func copyTreeSkipping(src, dst string, skip func(rel string) bool) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if skip != nil && rel != "." && skip(rel) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if err := os.Mkdir(target, 0o700); err != nil {
				return err
			}
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			if err := os.Symlink(link, target); err != nil {
				return err
			}
		case d.Type().IsRegular():
			if err := copyFile(path, target); err != nil {
				return err
			}
		default:
			return fmt.Errorf("testenv: unexpected file type in template: %s", path)
		}
		if d.Type()&fs.ModeSymlink == 0 {
			if err := os.Chmod(target, info.Mode().Perm()); err != nil {
				return err
			}
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok && os.Geteuid() == 0 {
			return os.Lchown(target, int(st.Uid), int(st.Gid))
		}
		return nil
	})
}

// copyFile copies the regular file src to the new file dst.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
