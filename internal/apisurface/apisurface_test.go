package apisurface

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestExportedFollowsAliases builds a two-package module in a temporary
// directory: pub aliases internal/x's T (fields, a method, an unexported
// field) and an outside package's type, which is not followed.
func TestExportedFollowsAliases(t *testing.T) {
	root := t.TempDir()
	write := func(path, text string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/m\n\ngo 1.22\n")
	write("internal/x/x.go", `package x

type T struct {
	A int
	b int
}

func (T) M()  {}
func (T) m()  {}
func (*T) P() {}

type U int
`)
	write("pub/pub.go", `package pub

import (
	"time"

	inner "example.com/m/internal/x"
)

type T = inner.T
type D = time.Duration
type unexported = inner.U

func F() {}
`)
	got, err := Exported(filepath.Join(root, "pub"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"D", "F", "T", "T.A", "T.M", "T.P"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Exported = %v, want %v", got, want)
	}
}
