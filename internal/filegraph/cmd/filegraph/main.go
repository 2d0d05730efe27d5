// Command filegraph prints the largest reference cycle between the files of
// a Go package (see package filegraph): how many of its files are in it,
// which, and the pairs of files that use each other.
//
//	go run ./internal/filegraph/cmd/filegraph ./apply
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/walapply/walapply/internal/filegraph"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: filegraph DIR...")
		os.Exit(2)
	}
	for _, dir := range os.Args[1:] {
		g, err := filegraph.Load(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		largest := g.Components()[0]
		mutual := g.Mutual()
		fmt.Printf("%s: %d files; largest cycle: %d files; %d pairs use each other\n",
			dir, len(g.Files), len(largest), len(mutual))
		fmt.Printf("  cycle: %s\n", strings.Join(largest, " "))
		for _, p := range mutual {
			fmt.Printf("  %s <-> %s\n", p[0], p[1])
		}
	}
}
