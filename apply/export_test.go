package apply

import "github.com/walapply/walapply/state"

// SetSpillFS makes the applier of c write its spill files through fsys: the
// seam apply_test's fault tests inject I/O errors through, kept out of the
// public API.
func SetSpillFS(c *Config, fsys state.FS) { c.spillFS = fsys }
