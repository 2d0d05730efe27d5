package apply

// SetParallelCommitted makes the applier of c call f right after a
// streamed transaction applied as it streamed committed on its connection,
// before the applier's origin follows it; an error from f ends the session
// there, as a crash at that point would.
func SetParallelCommitted(c *Config, f func(xid uint32) error) { c.parallelCommitted = f }
