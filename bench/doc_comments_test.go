package bench

import (
	"testing"

	"github.com/walapply/walapply/internal/doccheck"
)

// TestDesignCommentsAttached fails when a design comment of this package
// stands detached from any declaration, where go doc does not show it.
func TestDesignCommentsAttached(t *testing.T) { doccheck.Check(t) }

// TestDocCommentNames fails when a doc comment of this package starts with
// a name the package no longer has (renamed without its comment).
func TestDocCommentNames(t *testing.T) { doccheck.CheckNames(t) }
