// Package doccheck finds design comments that go doc does not show: comment
// blocks at a file's top level that are attached to no declaration and are
// not the package comment. A block separated from the declaration below it
// by a blank line, or sitting between the package clause or the imports and
// the first declaration, belongs to nothing, so go doc leaves it out.
//
// It also finds doc comments that start with a name the package no longer
// has (Misnamed): a declaration renamed without its comment, which go doc
// shows under the new name with the old one.
//
// Packages call Detached from a test so that a design comment detached again
// fails the build's tests, not a reader months later (Check; CheckNames for
// Misnamed).
package doccheck

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

// MinLines is the size from which a detached comment block counts as a
// design comment: shorter ones are section labels and notes in passing.
const MinLines = 3

// Detached returns, as "file:line: first line", every comment block of
// MinLines or more lines in dir's non-test Go files that is attached to no
// declaration and is not the package comment. Comments inside declarations
// (function bodies, struct fields, grouped specs), comments that trail a
// declaration's last line, comments above the package clause (build
// constraints, licence headers) and //go: directives are not counted.
func Detached(dir string) ([]string, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var found []string
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
		if err != nil {
			return nil, fmt.Errorf("parsing %s for detached comments: %w", name, err)
		}
		for _, cg := range detachedIn(fset, f) {
			first := strings.SplitN(cg.Text(), "\n", 2)[0]
			found = append(found, fmt.Sprintf("%s:%d: %s", filepath.Base(name), fset.Position(cg.Pos()).Line, first))
		}
	}
	return found, nil
}

// detachedIn returns f's top-level comment groups of MinLines or more lines
// that are neither f's package comment nor a declaration's doc comment.
func detachedIn(fset *token.FileSet, f *ast.File) []*ast.CommentGroup {
	attached := map[*ast.CommentGroup]bool{}
	if f.Doc != nil {
		attached[f.Doc] = true
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Doc != nil {
				attached[d.Doc] = true
			}
		case *ast.GenDecl:
			if d.Doc != nil {
				attached[d.Doc] = true
			}
		}
	}
	var out []*ast.CommentGroup
	for _, cg := range f.Comments {
		if attached[cg] || cg.Pos() < f.Package || strings.HasPrefix(cg.List[0].Text, "//go:") {
			continue
		}
		first, last := fset.Position(cg.Pos()).Line, fset.Position(cg.End()).Line
		if last-first+1 < MinLines || insideOrTrailing(fset, f, cg, first) {
			continue
		}
		out = append(out, cg)
	}
	return out
}

// insideOrTrailing reports whether cg lies within a declaration or starts on
// the line where one ends.
func insideOrTrailing(fset *token.FileSet, f *ast.File, cg *ast.CommentGroup, line int) bool {
	for _, d := range f.Decls {
		if cg.Pos() >= d.Pos() && cg.End() <= d.End() {
			return true
		}
		if fset.Position(d.End()).Line == line {
			return true
		}
	}
	return false
}

// Check fails t when a design comment of the package in the current
// directory (a test's) stands detached from any declaration, where go doc
// does not show it.
func Check(t testing.TB) {
	t.Helper()
	found, err := Detached(".")
	if err != nil {
		t.Fatal(err)
	}
	if len(found) > 0 {
		t.Errorf("%d comment blocks attached to no declaration, so go doc shows none of them; "+
			"move each onto the declaration it is about (no blank line between), or into doc.go:\n%s",
			len(found), strings.Join(found, "\n"))
	}
}
