// Package misnamed is a fixture of doccheck's test.
package misnamed

// oldName was this function's name before a rename.
func newName() {}

// Observer's doc may start with its method, a name the package has.
type Observer interface {
	ObserveCopy()
}

// helperFunc is not called so here: the comment names nothing.
type Renamed struct{}

// TestSomething's doc is about what it tests, not its own name.
func TestSomething() {}

// plainword starts the doc: no capital inside, not taken for a name.
func other() {}

// newName's doc starting with its own name is what doc comments do.
func documented() { newName() }
