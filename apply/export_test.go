package apply

import "github.com/walapply/walapply/state"

// SetSpillFS makes the applier of c write its spill files through fsys: the
// seam apply_test's fault tests inject I/O errors through, kept out of the
// public API.
func SetSpillFS(c *Config, fsys state.FS) { c.spillFS = fsys }

// UseTextDigest makes compare hash rows by their text form whatever the
// servers' versions, as it does where one predates PostgreSQL 14; the
// returned function undoes it.
func UseTextDigest() (restore func()) {
	old := rowHashFrom
	rowHashFrom = 1 << 30
	return func() { rowHashFrom = old }
}
