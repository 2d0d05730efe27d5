package ddl

import (
	"testing"

	"github.com/walapply/walapply/internal/doccheck"
)

func TestDesignCommentsAttached(t *testing.T) { doccheck.Check(t) }
