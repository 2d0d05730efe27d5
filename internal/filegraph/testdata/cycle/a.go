package cycle

// A is used by b.go; a.go uses b.go's method.
type A struct{ n int }

func useB() int { var b B; return b.get() }
