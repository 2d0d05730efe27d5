// Package apisurface pins the exported API of walapply's public packages:
// each package's test lists the exported identifiers its non-test files
// declare (top-level names, and the exported methods and fields of exported
// types) and compares them with a golden list in its testdata, so that a new
// export, or a lost one, is a deliberate change reviewed in the diff.
package apisurface

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// Exported lists the exported identifiers declared by the non-test Go files
// of the package in dir, sorted: "Name" for a top-level constant, variable,
// function or type, "Type.Name" for an exported method or struct field (or
// interface method) of an exported type.
//
// An exported alias of a type declared in another package of the same
// module (type Name = internal/x.T) is followed: its members are T's
// exported fields and methods, listed as Name's, so that moving a type
// into an internal package and leaving an alias behind changes nothing
// here, and a field added to T later is seen.
func Exported(dir string) ([]string, error) {
	files, err := parseDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, f := range files {
		for _, d := range f.Decls {
			names = append(names, declared(d)...)
		}
		for _, a := range aliases(f) {
			m, err := aliasMembers(dir, a)
			if err != nil {
				return nil, err
			}
			names = append(names, m...)
		}
	}
	sort.Strings(names)
	return names, nil
}

// parseDir parses the non-test Go files of the package in dir.
func parseDir(dir string) ([]*ast.File, error) {
	fset := token.NewFileSet()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, fn := range paths {
		if strings.HasSuffix(fn, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, fn, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

// alias is an exported alias of another package's type: type name = pkg.typ.
type alias struct{ name, importPath, typ string }

// aliases lists the exported type aliases of f whose target is a type of
// another package.
func aliases(f *ast.File) []alias {
	var out []alias
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.TYPE {
			continue
		}
		for _, s := range g.Specs {
			ts := s.(*ast.TypeSpec)
			sel, ok := ts.Type.(*ast.SelectorExpr)
			if !ts.Assign.IsValid() || !ts.Name.IsExported() || !ok {
				continue
			}
			pkg, ok := sel.X.(*ast.Ident)
			if !ok {
				continue
			}
			if path := importPath(f, pkg.Name); path != "" {
				out = append(out, alias{ts.Name.Name, path, sel.Sel.Name})
			}
		}
	}
	return out
}

// importPath is the path f imports under the name pkg ("" if none): its
// explicit name, or the last element of the path.
func importPath(f *ast.File, pkg string) string {
	for _, im := range f.Imports {
		path := strings.Trim(im.Path.Value, `"`)
		name := path[strings.LastIndex(path, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		if name == pkg {
			return path
		}
	}
	return ""
}

// aliasMembers lists a's members: the exported fields and methods of its
// target type, as a.name's. A target outside the module (found by the
// go.mod above dir) is not followed: its API is not this module's to pin.
func aliasMembers(dir string, a alias) ([]string, error) {
	root, module, err := moduleOf(dir)
	if err != nil {
		return nil, err
	}
	rel, ok := strings.CutPrefix(a.importPath, module+"/")
	if !ok {
		return nil, nil
	}
	files, err := parseDir(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		return nil, fmt.Errorf("following alias %s to %s: %w", a.name, a.importPath, err)
	}
	var names []string
	for _, f := range files {
		for _, d := range f.Decls {
			for _, n := range declared(d) {
				if m, ok := strings.CutPrefix(n, a.typ+"."); ok {
					names = append(names, a.name+"."+m)
				}
			}
		}
	}
	return names, nil
}

// moduleOf finds the go.mod at or above dir: the module's root directory
// and path.
func moduleOf(dir string) (root, module string, err error) {
	d, err := filepath.Abs(dir)
	if err != nil {
		return "", "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil {
			for _, l := range strings.Split(string(b), "\n") {
				if m, ok := strings.CutPrefix(strings.TrimSpace(l), "module "); ok {
					return d, strings.Trim(strings.TrimSpace(m), `"`), nil
				}
			}
			return "", "", fmt.Errorf("%s: no module line", filepath.Join(d, "go.mod"))
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", "", fmt.Errorf("no go.mod at or above %s", dir)
		}
		d = parent
	}
}

func declared(d ast.Decl) []string {
	var names []string
	switch d := d.(type) {
	case *ast.FuncDecl:
		if !d.Name.IsExported() {
			return nil
		}
		if d.Recv == nil {
			return []string{d.Name.Name}
		}
		if recv := receiver(d.Recv.List[0].Type); ast.IsExported(recv) {
			return []string{recv + "." + d.Name.Name}
		}
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.ValueSpec:
				for _, n := range s.Names {
					if n.IsExported() {
						names = append(names, n.Name)
					}
				}
			case *ast.TypeSpec:
				if !s.Name.IsExported() {
					continue
				}
				names = append(names, s.Name.Name)
				names = append(names, members(s.Name.Name, s.Type)...)
			}
		}
	}
	return names
}

// members lists the exported fields of a struct type and the methods of an
// interface type (embedded ones by their type's name).
func members(typ string, t ast.Expr) []string {
	var list *ast.FieldList
	switch t := t.(type) {
	case *ast.StructType:
		list = t.Fields
	case *ast.InterfaceType:
		list = t.Methods
	default:
		return nil
	}
	var names []string
	for _, f := range list.List {
		if len(f.Names) == 0 {
			if n := receiver(f.Type); ast.IsExported(n) {
				names = append(names, typ+"."+n)
			}
			continue
		}
		for _, n := range f.Names {
			if n.IsExported() {
				names = append(names, typ+"."+n.Name)
			}
		}
	}
	return names
}

// receiver is the name of a receiver's or embedded field's type, without
// pointer, package or type parameters.
func receiver(t ast.Expr) string {
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.SelectorExpr:
			return x.Sel.Name
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// Check fails t unless the package in the current directory exports exactly
// the identifiers listed in testdata/api.txt, one a line. With
// WALAPPLY_UPDATE_API=1 in the environment it rewrites the list instead.
func Check(t testing.TB) {
	t.Helper()
	got, err := Exported(".")
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "api.txt")
	if os.Getenv("WALAPPLY_UPDATE_API") == "1" {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (WALAPPLY_UPDATE_API=1 writes it)", err)
	}
	want := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		want[l] = true
	}
	have := map[string]bool{}
	var added, removed []string
	for _, n := range got {
		have[n] = true
		if !want[n] {
			added = append(added, n)
		}
	}
	for n := range want {
		if !have[n] {
			removed = append(removed, n)
		}
	}
	sort.Strings(removed)
	if len(added) > 0 || len(removed) > 0 {
		t.Errorf("the exported API differs from %s:\n  new exports: %v\n  gone: %v\n"+
			"a new export is a deliberate change: make it unexported, or add it to %s "+
			"(WALAPPLY_UPDATE_API=1 go test -run TestAPISurface rewrites it)",
			golden, added, removed, golden)
	}
}
