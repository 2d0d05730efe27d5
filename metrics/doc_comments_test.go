package metrics

import (
	"testing"

	"github.com/walapply/walapply/internal/doccheck"
)

// TestDesignCommentsAttached fails when a design comment of this package
// stands detached from any declaration, where go doc does not show it.
func TestDesignCommentsAttached(t *testing.T) { doccheck.Check(t) }
