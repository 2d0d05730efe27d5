package engine

import "fmt"

// Event is what the transaction state machine (Machine) makes of one
// message: what the applier has to do with it.
type Event uint8

// Events, one per thing the applier does.
const (
	EvNone             Event = iota // nothing to do (e.g. a non-transactional logical message)
	EvRelation                      // remember a relation's description
	EvType                          // remember a type's description
	EvOrigin                        // the transaction came from another origin
	EvBegin                         // start applying a transaction
	EvChange                        // apply a change inside the open transaction
	EvCommit                        // commit the open transaction
	EvBeginPrepare                  // start a transaction that will be prepared
	EvPrepare                       // prepare the open transaction
	EvCommitPrepared                // COMMIT PREPARED
	EvRollbackPrepared              // ROLLBACK PREPARED
	EvStreamStart                   // a stream block opens (FirstSegment: a new streamed transaction)
	EvStreamStop                    // the stream block closes
	EvStreamChange                  // a change (or Relation/Type/Message) inside a stream block: spill it
	EvStreamCommit                  // replay and commit a streamed transaction
	EvStreamAbort                   // discard a streamed transaction or one of its subtransactions
	EvStreamPrepare                 // replay and prepare a streamed transaction
	EvMessage                       // a transactional logical message inside a transaction
)

var eventNames = [...]string{"none", "relation", "type", "origin", "begin", "change", "commit",
	"begin-prepare", "prepare", "commit-prepared", "rollback-prepared", "stream-start",
	"stream-stop", "stream-change", "stream-commit", "stream-abort", "stream-prepare", "message"}

func (e Event) String() string {
	if int(e) < len(eventNames) {
		return eventNames[e]
	}
	return fmt.Sprintf("event(%d)", e)
}

// NeedsOwnTransaction reports the events whose target work cannot share a
// group (group commit): the group before them is committed and settled
// first.
func (e Event) NeedsOwnTransaction() bool {
	switch e {
	case EvBeginPrepare, EvCommitPrepared, EvRollbackPrepared, EvStreamCommit, EvStreamPrepare:
		return true
	}
	return false
}
