// Package filegraph measures how the files of one Go package depend on each
// other: file A uses file B when an identifier in A refers to a declaration
// of B (a package-level name, a method, or a field of a type declared in B).
// Files that reach each other through such uses form a strongly connected
// component; a large one means that no file of it can be read, or moved to
// another package, without the others. Issue 19 uses it for the before and
// after figures of apply's reference cycle (cmd/filegraph prints them).
package filegraph

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// Graph is the use relation between the non-test files of a package.
type Graph struct {
	// Files are the base names of the package's non-test Go files, sorted.
	Files []string
	// Uses[a][b] is true when file a uses a declaration of file b (a != b).
	Uses map[string]map[string]bool
}

// Load type-checks the package in dir (its non-test files for the current
// build context) and returns its file graph. Imported packages are read
// from their compiled export data, which `go list -export` builds.
func Load(dir string) (*Graph, error) {
	bp, err := build.ImportDir(dir, 0)
	if err != nil {
		return nil, fmt.Errorf("reading package %s: %w", dir, err)
	}
	exports, err := exportData(dir)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range bp.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	lookup := func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	}
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", lookup)}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	pkg, err := conf.Check(bp.ImportPath, fset, files, info)
	if err != nil {
		return nil, fmt.Errorf("type-checking %s: %w", dir, err)
	}
	g := &Graph{Uses: map[string]map[string]bool{}}
	for _, name := range bp.GoFiles {
		g.Files = append(g.Files, name)
	}
	sort.Strings(g.Files)
	fileOf := func(pos token.Pos) string { return filepath.Base(fset.Position(pos).Filename) }
	for id, obj := range info.Uses {
		if obj == nil || obj.Pkg() != pkg || !declaredAtTop(pkg, obj) {
			continue
		}
		from, to := fileOf(id.Pos()), fileOf(obj.Pos())
		if from == to {
			continue
		}
		if g.Uses[from] == nil {
			g.Uses[from] = map[string]bool{}
		}
		g.Uses[from][to] = true
	}
	return g, nil
}

// declaredAtTop reports whether obj is declared by a top-level declaration
// of pkg: a package-level object, a method, or a struct field or interface
// method (whose declaration is their type's).
func declaredAtTop(pkg *types.Package, obj types.Object) bool {
	if obj.Parent() == pkg.Scope() {
		return true
	}
	switch o := obj.(type) {
	case *types.Func:
		return o.Signature().Recv() != nil
	case *types.Var:
		return o.IsField()
	}
	return false
}

// exportData maps each package that the package in dir depends on to its
// export data file.
func exportData(dir string) (map[string]string, error) {
	cmd := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}", ".")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -export in %s: %w: %s", dir, err, strings.TrimSpace(stderr.String()))
	}
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, file, ok := strings.Cut(line, "\t")
		if ok && file != "" {
			m[path] = file
		}
	}
	return m, nil
}

// Components returns the strongly connected components of the graph,
// largest first (ties by first file name); each component is sorted. A file
// in no cycle is a component of one.
func (g *Graph) Components() [][]string {
	index := map[string]int{}
	low := map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	var comps [][]string
	next := 0
	var visit func(v string)
	visit = func(v string) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range sortedKeys(g.Uses[v]) {
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			var comp []string
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				comp = append(comp, w)
				if w == v {
					break
				}
			}
			sort.Strings(comp)
			comps = append(comps, comp)
		}
	}
	for _, f := range g.Files {
		if _, seen := index[f]; !seen {
			visit(f)
		}
	}
	sort.SliceStable(comps, func(i, j int) bool {
		if len(comps[i]) != len(comps[j]) {
			return len(comps[i]) > len(comps[j])
		}
		return comps[i][0] < comps[j][0]
	})
	return comps
}

// Mutual returns the pairs of files that use each other, each pair sorted,
// in file order.
func (g *Graph) Mutual() [][2]string {
	var pairs [][2]string
	for _, a := range g.Files {
		for _, b := range sortedKeys(g.Uses[a]) {
			if a < b && g.Uses[b][a] {
				pairs = append(pairs, [2]string{a, b})
			}
		}
	}
	return pairs
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
