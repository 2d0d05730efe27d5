package apply

import (
	"testing"

	"github.com/walapply/walapply/internal/apisurface"
)

// TestAPISurface pins the package's exported identifiers to testdata/api.txt:
// exporting something more (or dropping an export) is a deliberate change.
func TestAPISurface(t *testing.T) { apisurface.Check(t) }
