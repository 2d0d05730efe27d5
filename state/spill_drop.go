package state

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
)

// RemoveSpillFiles removes the spill files of applier for target from dir,
// for `walapply drop`, and the directory's owner file once no spill file is
// left: the directory is then as OpenSpillDir found it before its first
// use. It removes files only from a directory whose owner file names
// applier and target (spill_owner.go), and there only the spill files whose
// intact header names applier. Everything else stays: a directory of
// another applier or target, or whose owner is unknown (no owner file, or
// a damaged one), and the files whose header names another applier or
// cannot be read; the spill files among them are returned in left. A
// missing directory has nothing to remove. The directory itself stays.
func RemoveSpillFiles(fsys FS, dir, applier, target string) (removed, left []string, err error) {
	if err := validSpillApplier(applier); err != nil {
		return nil, nil, err
	}
	if err := validSpillTarget(target); err != nil {
		return nil, nil, err
	}
	names, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("state: listing spill directory %s: %w", dir, err)
	}
	d := &SpillDir{fs: fsys, dir: dir, applier: applier, target: target}
	ownerPath := filepath.Join(dir, spillOwnerFile)
	data, err := d.readOwnerFile(ownerPath)
	owner, ok := parseSpillOwner(data)
	ours := err == nil && ok && owner == d.owner()
	for _, name := range names {
		if !isSpillFileName(name) {
			continue
		}
		path := filepath.Join(dir, name)
		if h, ok := d.headerApplier(path); !ours || !ok || h != applier {
			left = append(left, path)
			continue
		}
		if err := fsys.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, left, fmt.Errorf("state: removing spill file %s: %w", path, err)
		}
		removed = append(removed, path)
	}
	if ours && len(left) == 0 {
		if err := fsys.Remove(ownerPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, left, fmt.Errorf("state: removing the owner file %s: %w", ownerPath, err)
		}
	}
	return removed, left, nil
}
