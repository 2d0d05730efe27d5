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
