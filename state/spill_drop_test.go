package state

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// RemoveSpillFiles removes only the files whose header names the applier.
func TestRemoveSpillFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spill")
	if removed, left, err := RemoveSpillFiles(OSFS, dir, "app"); err != nil || removed != nil || left != nil {
		t.Fatalf("missing directory: %v, %v, %v", removed, left, err)
	}
	mine, _, err := OpenSpillDir(OSFS, dir, "app")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := writeTestFile(t, mine, 1, []rec{{1, "x"}})
	b, _ := writeTestFile(t, mine, 2, []rec{{2, "y"}})
	// Written by applier "app_x" into the same directory (which it must
	// not share, but drop does not delete what is not the applier's).
	theirs := &SpillDir{fs: OSFS, dir: dir, applier: "app_x", files: map[uint32]*SpillFile{}}
	c, _ := writeTestFile(t, theirs, 3, []rec{{3, "z"}})
	torn := filepath.Join(dir, "xid-4.spill")
	other := filepath.Join(dir, "notes.txt")
	for _, p := range []string{torn, other} {
		if err := os.WriteFile(p, []byte("torn header"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	removed, left, err := RemoveSpillFiles(OSFS, dir, "app")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(removed, []string{a, b}) || !slices.Equal(left, []string{c, torn}) {
		t.Errorf("removed %q, left %q; want %q and %q", removed, left, []string{a, b}, []string{c, torn})
	}
	for _, p := range []string{c, torn, other} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}
