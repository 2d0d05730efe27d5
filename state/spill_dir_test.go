package state

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestOpenSpillDir(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "a", "b")
	// An earlier run leaves files behind (no Remove).
	prev, _, err := OpenSpillDir(OSFS, dir, "app1")
	if err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, prev, 1, []rec{{1, "x"}})
	writeTestFile(t, prev, 4000000000, []rec{{4000000000, "y"}})
	for name, data := range map[string]string{
		"xid-5.spill":  "torn header", // crashed while being created
		"notes.txt":    "not ours",
		"xid-x.spill":  "not our name pattern",
		"xid-6.spill~": "not our name pattern",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	d, removed, err := OpenSpillDir(OSFS, dir, "app1")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "xid-1.spill"), filepath.Join(dir, "xid-4000000000.spill"), filepath.Join(dir, "xid-5.spill")}
	slices.Sort(removed)
	if !slices.Equal(removed, want) {
		t.Fatalf("removed %v, want %v", removed, want)
	}
	left, _ := OSFS.ReadDir(dir)
	if !slices.Equal(left, []string{"notes.txt", "xid-6.spill~", "xid-x.spill"}) {
		t.Fatalf("left in the directory: %v", left)
	}
	if d.Has(1) {
		t.Fatal("a stale file is known to the new run")
	}

	// Another applier's file makes OpenSpillDir refuse, and stays.
	other, _, err := OpenSpillDir(OSFS, filepath.Join(root, "other"), "app2")
	if err != nil {
		t.Fatal(err)
	}
	path, _ := writeTestFile(t, other, 9, []rec{{9, "z"}})
	if err := os.Rename(path, filepath.Join(dir, "xid-9.spill")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := OpenSpillDir(OSFS, dir, "app1"); !errors.Is(err, ErrSpillMismatch) || !strings.Contains(err.Error(), `"app2"`) {
		t.Fatalf("OpenSpillDir over another applier's file: %v, want ErrSpillMismatch naming app2", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "xid-9.spill")); err != nil {
		t.Fatalf("another applier's file was touched: %v", err)
	}

	if _, _, err := OpenSpillDir(OSFS, dir, ""); err == nil {
		t.Fatal("OpenSpillDir with an empty applier name succeeded")
	}
}

func TestSpillDirRemoveAll(t *testing.T) {
	d := openTestDir(t, OSFS, 0)
	for xid := uint32(1); xid <= 3; xid++ {
		f, err := d.Create(xid)
		if err != nil {
			t.Fatal(err)
		}
		appendAll(t, f, rec{xid, "m"})
		if xid == 2 {
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	removed, err := d.RemoveAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 3 || d.Stats() != (SpillStats{}) {
		t.Fatalf("RemoveAll removed %v, Stats %+v", removed, d.Stats())
	}
	if left, _ := OSFS.ReadDir(d.Dir()); len(left) != 0 {
		t.Fatalf("left: %v", left)
	}
	// The xids can be created again.
	if _, err := d.Create(2); err != nil {
		t.Fatal(err)
	}
}
