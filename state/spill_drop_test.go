package state

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// RemoveSpillFiles removes only spill files of the applier, from a
// directory the owner file shows to be the applier's for the target.
func TestRemoveSpillFiles(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "spill")
	if removed, left, err := RemoveSpillFiles(OSFS, dir, "app", "t1"); err != nil || removed != nil || left != nil {
		t.Fatalf("missing directory: %v, %v, %v", removed, left, err)
	}
	mine, _, err := OpenSpillDir(OSFS, dir, "app", "t1")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := writeTestFile(t, mine, 1, []rec{{1, "x"}})
	b, _ := writeTestFile(t, mine, 2, []rec{{2, "y"}})
	// Another applier's file in it (it must not share the directory, but
	// drop does not delete what is not the applier's), and a torn one.
	theirs := &SpillDir{fs: OSFS, dir: dir, applier: "app_x", target: "t1", files: map[uint32]*SpillFile{}}
	c, _ := writeTestFile(t, theirs, 3, []rec{{3, "z"}})
	torn := filepath.Join(dir, "xid-4.spill")
	other := filepath.Join(dir, "notes.txt")
	for _, p := range []string{torn, other} {
		if err := os.WriteFile(p, []byte("torn header"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Of another target, or of nobody known: nothing is removed.
	for _, target := range []string{"t2"} {
		if removed, left, err := RemoveSpillFiles(OSFS, dir, "app", target); err != nil || removed != nil || len(left) != 4 {
			t.Errorf("directory of another target: removed %q, left %q, %v", removed, left, err)
		}
	}
	removed, left, err := RemoveSpillFiles(OSFS, dir, "app", "t1")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(removed, []string{a, b}) || !slices.Equal(left, []string{c, torn}) {
		t.Errorf("removed %q, left %q; want %q and %q", removed, left, []string{a, b}, []string{c, torn})
	}
	for _, p := range []string{c, torn, other, filepath.Join(dir, spillOwnerFile)} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	// Once only its files were there, the owner file goes too.
	for _, p := range []string{c, torn} {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	writeTestFile(t, mine, 5, []rec{{5, "x"}})
	if removed, left, err := RemoveSpillFiles(OSFS, dir, "app", "t1"); err != nil || len(removed) != 1 || left != nil {
		t.Errorf("removed %q, left %q, %v", removed, left, err)
	}
	if names, _ := OSFS.ReadDir(dir); !slices.Equal(names, []string{"notes.txt"}) {
		t.Errorf("left in the directory: %q", names)
	}
	// No owner file: whose the files are is unknown.
	bare := filepath.Join(root, "bare")
	if err := os.MkdirAll(bare, 0o700); err != nil {
		t.Fatal(err)
	}
	d := &SpillDir{fs: OSFS, dir: bare, applier: "app", target: "t1", files: map[uint32]*SpillFile{}}
	writeTestFile(t, d, 6, []rec{{6, "x"}})
	if removed, left, err := RemoveSpillFiles(OSFS, bare, "app", "t1"); err != nil || removed != nil || len(left) != 1 {
		t.Errorf("directory without an owner file: removed %q, left %q, %v", removed, left, err)
	}
}
