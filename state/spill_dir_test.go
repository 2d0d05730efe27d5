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
	prev, _, err := OpenSpillDir(OSFS, dir, "app1", "tgt1")
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
	d, removed, err := OpenSpillDir(OSFS, dir, "app1", "tgt1")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "xid-1.spill"), filepath.Join(dir, "xid-4000000000.spill"), filepath.Join(dir, "xid-5.spill")}
	slices.Sort(removed)
	if !slices.Equal(removed, want) {
		t.Fatalf("removed %v, want %v", removed, want)
	}
	left, _ := OSFS.ReadDir(dir)
	if !slices.Equal(left, []string{"notes.txt", spillOwnerFile, "xid-6.spill~", "xid-x.spill"}) {
		t.Fatalf("left in the directory: %v", left)
	}
	if d.Has(1) {
		t.Fatal("a stale file is known to the new run")
	}

	// Another applier's file makes OpenSpillDir refuse, and stays.
	other, _, err := OpenSpillDir(OSFS, filepath.Join(root, "other"), "app2", "tgt1")
	if err != nil {
		t.Fatal(err)
	}
	path, _ := writeTestFile(t, other, 9, []rec{{9, "z"}})
	if err := os.Rename(path, filepath.Join(dir, "xid-9.spill")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := OpenSpillDir(OSFS, dir, "app1", "tgt1"); !errors.Is(err, ErrSpillMismatch) || !strings.Contains(err.Error(), `"app2"`) {
		t.Fatalf("OpenSpillDir over another applier's file: %v, want ErrSpillMismatch naming app2", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "xid-9.spill")); err != nil {
		t.Fatalf("another applier's file was touched: %v", err)
	}

	if _, _, err := OpenSpillDir(OSFS, dir, "", "tgt1"); err == nil {
		t.Fatal("OpenSpillDir with an empty applier name succeeded")
	}
}

// Two appliers of one name feeding different targets never share a spill
// directory: a start removes stale files only in a directory whose owner
// file names its applier and target, and refuses any other, touching
// nothing.
func TestSpillDirOwner(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "spill")
	a, _, err := OpenSpillDir(OSFS, dir, "app", "target-a")
	if err != nil {
		t.Fatal(err)
	}
	pathA, _ := writeTestFile(t, a, 7, []rec{{7, "a's change"}})
	untouched := func() {
		t.Helper()
		if _, err := os.Stat(pathA); err != nil {
			t.Fatalf("target-a's spill file was touched: %v", err)
		}
	}
	refused := func(dir, applier, target string, frags ...string) {
		t.Helper()
		_, removed, err := OpenSpillDir(OSFS, dir, applier, target)
		if !errors.Is(err, ErrSpillDirOwner) || len(removed) != 0 {
			t.Fatalf("OpenSpillDir(%s, %s, %s): removed %v, %v; want ErrSpillDirOwner, nothing removed", dir, applier, target, removed, err)
		}
		for _, f := range frags {
			if !strings.Contains(err.Error(), f) {
				t.Fatalf("error %q does not say %q", err, f)
			}
		}
		untouched()
	}

	// Same name, another target; another name, same target.
	refused(dir, "app", "target-b", `applier "app" for target target-a`, `applier "app" for target target-b`)
	refused(dir, "other", "target-a", `applier "app" for target target-a`)
	// The owner itself removes its stale file.
	if _, removed, err := OpenSpillDir(OSFS, dir, "app", "target-a"); err != nil || len(removed) != 1 || removed[0] != pathA {
		t.Fatalf("the owner's start removed %v, %v; want %s", removed, err, pathA)
	}

	// Spill files without an owner file (a walapply from before owner
	// files, or files copied in): nothing shows whose they are.
	legacy := filepath.Join(root, "legacy")
	old, _, err := OpenSpillDir(OSFS, legacy, "app", "target-a")
	if err != nil {
		t.Fatal(err)
	}
	pathA, _ = writeTestFile(t, old, 8, []rec{{8, "x"}})
	if err := os.Remove(filepath.Join(legacy, spillOwnerFile)); err != nil {
		t.Fatal(err)
	}
	refused(legacy, "app", "target-a", "no owner file", "xid-8.spill")

	// A damaged owner file: refused while spill files are there, written
	// again once there are none.
	if err := os.WriteFile(filepath.Join(legacy, spillOwnerFile), []byte("walapply spill dir"), 0o600); err != nil {
		t.Fatal(err)
	}
	refused(legacy, "app", "target-b", "is damaged")
	if err := os.Remove(pathA); err != nil {
		t.Fatal(err)
	}
	if _, _, err := OpenSpillDir(OSFS, legacy, "app", "target-b"); err != nil {
		t.Fatalf("a damaged owner file in a directory without spill files: %v", err)
	}
	if _, _, err := OpenSpillDir(OSFS, legacy, "app", "target-a"); !errors.Is(err, ErrSpillDirOwner) {
		t.Fatalf("the rewritten owner file does not keep target-a out: %v", err)
	}

	// A new, empty directory is claimed.
	if _, _, err := OpenSpillDir(OSFS, filepath.Join(root, "new"), "app", "target-b"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := OpenSpillDir(OSFS, filepath.Join(root, "y"), "app", "a\nb"); err == nil {
		t.Fatal("a target identity with a newline was accepted")
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
	if left, _ := OSFS.ReadDir(d.Dir()); !slices.Equal(left, []string{spillOwnerFile}) {
		t.Fatalf("left: %v", left)
	}
	// The xids can be created again.
	if _, err := d.Create(2); err != nil {
		t.Fatal(err)
	}
}

func TestSpillFileXid(t *testing.T) {
	for name, want := range map[string]int64{
		"xid-1.spill": 1, "xid-4294967295.spill": 4294967295, spillFileName(77): 77,
		"xid-4294967296.spill": -1, "xid-.spill": -1, "xid-x.spill": -1, "xid-6.spill~": -1, "x-6.spill": -1, spillOwnerFile: -1,
	} {
		xid, ok := SpillFileXid(name)
		if got := map[bool]int64{true: int64(xid), false: -1}[ok]; got != want {
			t.Errorf("SpillFileXid(%q) = %d, %v; want %d", name, xid, ok, want)
		}
	}
}
