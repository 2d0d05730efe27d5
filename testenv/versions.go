package testenv

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// EnvVersions names the environment variable that selects the major versions
// tests run against: a comma- or space-separated list such as "15,18", or
// "all". Unset or empty means DefaultVersions.
const EnvVersions = "WALAPPLY_TEST_PG"

// DefaultVersions is the selection used when EnvVersions is unset: the oldest
// and the newest supported version, which between them catch most
// version-dependent behaviour at half the cost of running all four.
const DefaultVersions = "15,18"

// SupportedVersions returns the major versions testenv can run, ascending.
func SupportedVersions() []int {
	return []int{15, 16, 17, 18}
}

// Versions returns the major versions selected by EnvVersions, ascending and
// without duplicates.
func Versions() ([]int, error) {
	return parseVersions(os.Getenv(EnvVersions))
}

// parseVersions parses an EnvVersions value.
func parseVersions(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		s = DefaultVersions
	}
	if strings.EqualFold(s, "all") {
		return SupportedVersions(), nil
	}
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })
	if len(fields) == 0 {
		return nil, fmt.Errorf("testenv: %s=%q selects no version", EnvVersions, s)
	}
	var out []int
	for _, f := range fields {
		v, err := strconv.Atoi(strings.TrimPrefix(strings.ToLower(f), "pg"))
		if err != nil || !slices.Contains(SupportedVersions(), v) {
			return nil, fmt.Errorf("%w: %s=%q: %q is not one of %v or \"all\"", ErrUnsupportedVersion, EnvVersions, s, f, SupportedVersions())
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out, nil
}

// defaultVersion is the version used when Options.Version is 0: the first
// (lowest) selected one.
func defaultVersion() (int, error) {
	vs, err := Versions()
	if err != nil {
		return 0, err
	}
	return vs[0], nil
}

// ForEachVersion runs fn as a subtest named "pg<version>" for each version
// selected by EnvVersions. An invalid selection fails t. The subtests are not
// parallel; call t.Parallel inside fn to make them so.
func ForEachVersion(t *testing.T, fn func(t *testing.T, version int)) {
	t.Helper()
	vs, err := Versions()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		t.Run(fmt.Sprintf("pg%d", v), func(t *testing.T) { fn(t, v) })
	}
}
