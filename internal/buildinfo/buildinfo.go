// Package buildinfo says which walapply a binary is: its module version,
// the version control revision it was built from and the Go version, as
// the Go toolchain stamps them into every binary (runtime/debug). The
// version command and the walapply_build_info metric both print this.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Info is what a binary knows about its build. Fields the build did not
// record are "unknown" (never empty, so that they can be label values).
type Info struct {
	// Version is the main module's version: a tag such as v1.2.0 for
	// `go install ...@v1.2.0`, "(devel)" for a build from a checkout.
	Version string
	// Revision is the commit the binary was built from, with "-modified"
	// when the working tree had uncommitted changes.
	Revision string
	// GoVersion is the toolchain that built the binary (go1.26.8).
	GoVersion string
}

// Read returns the running binary's Info.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Version: "unknown", Revision: "unknown", GoVersion: runtime.Version()}
	}
	return From(bi)
}

// From extracts Info from build information (Read's source; tests give
// their own).
func From(bi *debug.BuildInfo) Info {
	in := Info{Version: bi.Main.Version, Revision: "unknown", GoVersion: bi.GoVersion}
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if modified && in.Revision != "unknown" {
		in.Revision += "-modified"
	}
	if in.Version == "" {
		in.Version = "unknown"
	}
	if in.GoVersion == "" {
		in.GoVersion = runtime.Version()
	}
	return in
}

// String is the one line `walapply version` prints:
// "walapply v1.2.0 (revision 0123abc, go1.26.8)".
func (in Info) String() string {
	var b strings.Builder
	b.WriteString("walapply ")
	b.WriteString(in.Version)
	b.WriteString(" (revision ")
	b.WriteString(in.Revision)
	b.WriteString(", ")
	b.WriteString(in.GoVersion)
	b.WriteString(")")
	return b.String()
}
