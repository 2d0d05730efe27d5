package cycle

// B's method uses a.go's type and field.
type B struct{}

func (B) get() int { return A{n: 1}.n }
