package cycle

// c.go uses a.go but nothing uses c.go: it is in no cycle.
func useA() int { return useB() }
