// Package detached is a fixture of doccheck's test.
package detached

// A design note after the package clause,
// before the imports: go doc shows it
// nowhere.

import "fmt"

// A design note separated by a blank line
// from the declaration below it: go doc
// shows it nowhere.

// Attached is documented.
//
// Its design note, attached after its own
// doc, is shown.
func Attached() {
	// A section comment inside a body
	// is not a declaration's doc and
	// is not counted.
	fmt.Println()
}

// A short label.

//go:noinline
func directive() {}

var x = 1 // a trailing comment
// that goes on below it belongs to
// the declaration and is not counted
