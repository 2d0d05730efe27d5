package state

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
)

// RemoveSpillFiles removes applier's spill files from dir, for `walapply
// drop`: the files whose intact header names applier. Files of another
// applier, and files whose header cannot be read (whose they are is
// unknown), are left and returned in left; a missing directory has
// nothing to remove. It does not remove the directory.
func RemoveSpillFiles(fsys FS, dir, applier string) (removed, left []string, err error) {
	if err := validSpillApplier(applier); err != nil {
		return nil, nil, err
	}
	names, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("state: listing spill directory %s: %w", dir, err)
	}
	d := &SpillDir{fs: fsys, dir: dir, applier: applier}
	for _, name := range names {
		if !isSpillFileName(name) {
			continue
		}
		path := filepath.Join(dir, name)
		if owner, ok := d.headerApplier(path); !ok || owner != applier {
			left = append(left, path)
			continue
		}
		if err := fsys.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, left, fmt.Errorf("state: removing spill file %s: %w", path, err)
		}
		removed = append(removed, path)
	}
	return removed, left, nil
}
