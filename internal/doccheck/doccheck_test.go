package doccheck

import (
	"slices"
	"testing"
)

func TestDetached(t *testing.T) {
	got, err := Detached("testdata/detached")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"detached.go:4: A design note after the package clause,",
		"detached.go:10: A design note separated by a blank line",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Detached(testdata/detached) =\n%q\nwant\n%q", got, want)
	}
}

func TestMisnamed(t *testing.T) {
	got, err := Misnamed("testdata/misnamed")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"misnamed.go:4: doc of newName starts with oldName",
		"misnamed.go:12: doc of Renamed starts with helperFunc",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Misnamed(testdata/misnamed) =\n%q\nwant\n%q", got, want)
	}
}
