package doccheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// camelCase is a word that can only be an identifier: lower or upper case
// letters with a capital inside (applyChange, ReplStream), never English.
var camelCase = regexp.MustCompile(`^[A-Za-z][a-z0-9]*[A-Z][A-Za-z0-9]*$`)

// Misnamed returns, as "file:line: doc of X starts with Y", every doc
// comment of a function, method or type in dir's Go files (tests included)
// whose first word is a camelCase name that no identifier of the package's
// code uses: the comment still names what the declaration was called before
// a rename, so go doc starts its text with a name that is nowhere. A first
// word naming something that exists (an interface's method, the function a
// test is about) is not counted, nor are Test, Benchmark, Fuzz and Example
// functions.
func Misnamed(dir string) ([]string, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	fset := token.NewFileSet()
	var files []*ast.File
	used := map[string]bool{}
	for _, name := range names {
		src, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
		if err != nil {
			return nil, fmt.Errorf("parsing %s for misnamed doc comments: %w", name, err)
		}
		files = append(files, f)
		ast.Inspect(f, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok {
				used[id.Name] = true
			}
			return true
		})
	}
	var found []string
	for _, f := range files {
		for _, d := range f.Decls {
			name, doc := declDoc(d)
			if doc == nil || isTestFunc(name) {
				continue
			}
			word := firstWord(doc.Text())
			if word == name || !camelCase.MatchString(word) || used[word] {
				continue
			}
			found = append(found, fmt.Sprintf("%s:%d: doc of %s starts with %s",
				filepath.Base(fset.Position(doc.Pos()).Filename), fset.Position(doc.Pos()).Line, name, word))
		}
	}
	return found, nil
}

// declDoc returns the name and doc comment of a function, method or
// single-type declaration (nil for any other).
func declDoc(d ast.Decl) (string, *ast.CommentGroup) {
	switch d := d.(type) {
	case *ast.FuncDecl:
		return d.Name.Name, d.Doc
	case *ast.GenDecl:
		if d.Tok == token.TYPE && len(d.Specs) == 1 {
			return d.Specs[0].(*ast.TypeSpec).Name.Name, d.Doc
		}
	}
	return "", nil
}

// firstWord is text's first word without trailing punctuation or 's.
func firstWord(text string) string {
	fields := strings.Fields(text)
	if len(fields) == 0 {
		return ""
	}
	w := strings.TrimSuffix(fields[0], "'s")
	return strings.TrimRight(w, ",.:;()")
}

// isTestFunc reports whether name is one go test runs by its prefix.
func isTestFunc(name string) bool {
	for _, p := range []string{"Test", "Benchmark", "Fuzz", "Example"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// CheckNames fails t when a doc comment of the package in the current
// directory (a test's) starts with a name the package no longer has
// (Misnamed).
func CheckNames(t testing.TB) {
	t.Helper()
	found, err := Misnamed(".")
	if err != nil {
		t.Fatal(err)
	}
	if len(found) > 0 {
		t.Errorf("%d doc comments start with a name the package does not have (renamed without its comment?); "+
			"start each with the name it documents:\n%s", len(found), strings.Join(found, "\n"))
	}
}
