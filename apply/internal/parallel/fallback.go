package parallel

import "fmt"

// FallbackError ends a session so that streamed transaction Xid is applied
// through the spill path in the next (see the package doc, Fallback). It
// does not unwrap to Reason: the session ends with it whatever the reason
// was (a TxnError of the worker's is not the run loop's to retry).
type FallbackError struct {
	Xid    uint32
	Reason error
}

func (e *FallbackError) Error() string {
	return fmt.Sprintf("applying streamed transaction %d as it streamed: %v; it is applied from a spill file instead", e.Xid, e.Reason)
}
