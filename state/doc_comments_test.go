package state

import (
	"strings"
	"testing"

	"github.com/walapply/walapply/internal/doccheck"
)

// TestDesignCommentsAttached fails when a design comment of this package
// stands detached from any declaration, where go doc does not show it.
func TestDesignCommentsAttached(t *testing.T) {
	found, err := doccheck.Detached(".")
	if err != nil {
		t.Fatal(err)
	}
	if len(found) > 0 {
		t.Errorf("%d comment blocks attached to no declaration, so go doc shows none of them; "+
			"move each onto the declaration it is about (no blank line between), or into doc.go:\n%s",
			len(found), strings.Join(found, "\n"))
	}
}
