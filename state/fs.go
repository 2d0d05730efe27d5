package state

import "github.com/walapply/walapply/internal/spillfs"

// File is an open spill file. *os.File implements it.
type File = spillfs.File

// FS is the filesystem that spill files live in: the few operations the
// spill code needs, so that tests can inject I/O faults
// (internal/spillfs.FaultFS).
type FS = spillfs.FS

// OSFS is the operating system's filesystem.
var OSFS FS = spillfs.OSFS
