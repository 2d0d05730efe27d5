package engine

import (
	"testing"

	"github.com/walapply/walapply/internal/doccheck"
)

// TestDesignCommentsAttached fails when a design comment of this package
// is attached to no declaration, so that go doc shows every one.
func TestDesignCommentsAttached(t *testing.T) { doccheck.Check(t) }
