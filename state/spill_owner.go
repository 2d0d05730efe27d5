package state

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
)

// ErrSpillDirOwner: the spill directory belongs to another applier or
// target, or holds spill files whose owner nothing shows.
var ErrSpillDirOwner = errors.New("state: spill directory belongs to another applier or target")

// spillOwnerFile is the name of the owner file.
const spillOwnerFile = "walapply-spill-owner"

// spillOwnerMagic is the first line of an owner file.
const spillOwnerMagic = "walapply spill directory"

// spillOwner is what an owner file says.
//
// The owner file of a spill directory.
//
// Spill files are named by source xid, and one source feeds any number of
// appliers: two appliers of one name feeding different targets from one
// host (a staging and a production target, say) receive the same streamed
// transactions under the same xids. Sharing a directory, they would
// truncate each other's files, and each start would delete the other's as
// stale. A spill file's header names only the applier, so it cannot tell
// them apart; the directory's owner file names the applier and the target
// it applies to, and OpenSpillDir removes stale files only in a directory
// that it proves is its own:
//
//   - an owner file naming this applier and target: the directory is ours,
//     its spill files are stale files of ours;
//   - an owner file naming another applier or target: refused, touching
//     nothing (ErrSpillDirOwner);
//   - no owner file (a new directory, or one written by a walapply from
//     before owner files): claimed with a new owner file, unless it holds
//     spill files, whose owner is then unknown: refused, touching nothing;
//   - a damaged owner file (a crash while it was written, before any spill
//     file could be): written again if the directory holds no spill file,
//     refused otherwise.
//
// The owner file is created exclusively, so of two starts claiming one
// directory at once, one wins and the other reads the winner's file.
type spillOwner struct {
	applier, target string
}

func (o spillOwner) String() string {
	return fmt.Sprintf("applier %q for target %s", o.applier, o.target)
}

func (o spillOwner) encode() []byte {
	return []byte(spillOwnerMagic + "\napplier " + o.applier + "\ntarget " + o.target + "\n")
}

// parseSpillOwner reads an owner file's contents; ok is false when they are
// not a whole owner file.
func parseSpillOwner(data []byte) (o spillOwner, ok bool) {
	lines := strings.Split(string(data), "\n")
	if len(lines) != 4 || lines[0] != spillOwnerMagic || lines[3] != "" {
		return spillOwner{}, false
	}
	applier, ok1 := strings.CutPrefix(lines[1], "applier ")
	target, ok2 := strings.CutPrefix(lines[2], "target ")
	if !ok1 || !ok2 || applier == "" || target == "" {
		return spillOwner{}, false
	}
	return spillOwner{applier: applier, target: target}, true
}

// owner is what d's owner file says.
func (d *SpillDir) owner() spillOwner {
	return spillOwner{applier: d.applier, target: d.target}
}

// validSpillTarget checks a target identity for an owner file.
func validSpillTarget(target string) error {
	if target == "" || strings.ContainsAny(target, "\r\n") {
		return fmt.Errorf("state: invalid target identity %q for a spill directory: want a non-empty line", target)
	}
	return nil
}

// claim makes sure the directory is d's own (see spillOwner).
func (d *SpillDir) claim() error {
	path := filepath.Join(d.dir, spillOwnerFile)
	for attempt := 0; ; attempt++ {
		data, err := d.readOwnerFile(path)
		switch {
		case err == nil:
			owner, ok := parseSpillOwner(data)
			if ok && owner == d.owner() {
				return nil
			}
			if ok {
				return fmt.Errorf("%w: %s belongs to %s, not to %s: give each applier and target its own --spill-dir "+
					"(if that applier no longer runs, or reached the same target by another address, remove the directory first)",
					ErrSpillDirOwner, d.dir, owner, d.owner())
			}
			if err := d.refuseUnowned("its owner file " + path + " is damaged"); err != nil {
				return err
			}
			if err := d.fs.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("state: removing the damaged owner file %s: %w", path, err)
			}
		case errors.Is(err, fs.ErrNotExist):
			if err := d.refuseUnowned("it has no owner file " + spillOwnerFile); err != nil {
				return err
			}
		default:
			return fmt.Errorf("state: reading the owner file of spill directory %s: %w", d.dir, err)
		}
		err = d.writeOwnerFile(path)
		if errors.Is(err, fs.ErrExist) && attempt == 0 {
			continue // another start claimed it meanwhile: read its claim
		}
		return err
	}
}

// refuseUnowned fails when the directory holds spill files that no owner
// file attributes; why says what is wrong with the owner file.
func (d *SpillDir) refuseUnowned(why string) error {
	names, err := d.fs.ReadDir(d.dir)
	if err != nil {
		return fmt.Errorf("state: listing spill directory %s: %w", d.dir, err)
	}
	for _, name := range names {
		if isSpillFileName(name) {
			return fmt.Errorf("%w: %s holds spill files (%s) but %s, so nothing shows whose they are "+
				"(another walapply run of applier %q, for another target, may be using them): if none is running, remove the directory's xid-*.spill files and start again",
				ErrSpillDirOwner, d.dir, name, why, d.applier)
		}
	}
	return nil
}

func (d *SpillDir) readOwnerFile(path string) ([]byte, error) {
	f, err := d.fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 4096))
}

// writeOwnerFile creates the owner file; fs.ErrExist if there is one.
func (d *SpillDir) writeOwnerFile(path string) error {
	f, err := d.fs.CreateExclusive(path)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return err
		}
		return fmt.Errorf("state: creating the owner file of spill directory %s: %w", d.dir, err)
	}
	_, err = f.Write(d.owner().encode())
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("state: writing the owner file %s: %w", path, err)
	}
	return nil
}
