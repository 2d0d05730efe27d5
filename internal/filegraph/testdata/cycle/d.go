package cycle

// d.go uses nothing of the package.
func alone() int { return 0 }
