package apply

import (
	"fmt"

	"github.com/walapply/walapply/protocol"
)

// event is what the transaction state machine makes of one message: what
// the applier has to do with it.
type event uint8

// Events, one per thing the applier does.
const (
	evNone             event = iota // nothing to do (e.g. a non-transactional logical message)
	evRelation                      // remember a relation's description
	evType                          // remember a type's description
	evOrigin                        // the transaction came from another origin
	evBegin                         // start applying a transaction
	evChange                        // apply a change inside the open transaction
	evCommit                        // commit the open transaction
	evBeginPrepare                  // start a transaction that will be prepared
	evPrepare                       // prepare the open transaction
	evCommitPrepared                // COMMIT PREPARED
	evRollbackPrepared              // ROLLBACK PREPARED
	evStreamStart                   // a stream block opens (FirstSegment: a new streamed transaction)
	evStreamStop                    // the stream block closes
	evStreamChange                  // a change (or Relation/Type/Message) inside a stream block: spill it
	evStreamCommit                  // replay and commit a streamed transaction
	evStreamAbort                   // discard a streamed transaction or one of its subtransactions
	evStreamPrepare                 // replay and prepare a streamed transaction
	evMessage                       // a transactional logical message inside a transaction
)

var eventNames = [...]string{"none", "relation", "type", "origin", "begin", "change", "commit",
	"begin-prepare", "prepare", "commit-prepared", "rollback-prepared", "stream-start",
	"stream-stop", "stream-change", "stream-commit", "stream-abort", "stream-prepare", "message"}

func (e event) String() string {
	if int(e) < len(eventNames) {
		return eventNames[e]
	}
	return fmt.Sprintf("event(%d)", e)
}

type txnState uint8

const (
	stateNoTxn     txnState = iota
	stateInTxn              // between Begin and Commit
	stateInPrepare          // between Begin Prepare and Prepare
)

// txnMachine checks the framing of the message stream and says what each
// message means for the applier. It is pure: no I/O, no target, so the
// rules are tested by feeding it transcripts. It keeps
//
//   - whether a transaction (ordinary or to-be-prepared) is open, its Begin's
//     final LSN (a Commit must match it) and whether it has had changes yet
//     (an Origin must come before them);
//   - whether a stream block is open and for which top-level xid, and the set
//     of streamed transactions that have begun and not yet ended.
//
// Relation and Type messages are accepted anywhere: pgoutput sends them just
// before the first change that needs them.
type txnMachine struct {
	state      txnState
	finalLSN   protocol.LSN
	xid        uint32
	hadChanges bool

	inBlock     bool
	blockXid    uint32
	blockFirst  bool // the open block is the transaction's first segment
	blockChange bool // the open block has had changes (Origin must precede them)
	streams     map[uint32]struct{}
}

// newTxnMachine returns a machine in the idle state.
func newTxnMachine() *txnMachine {
	return &txnMachine{streams: map[uint32]struct{}{}}
}

// Reset forgets everything, as after a reconnect: the source resends every
// transaction that was not confirmed, streamed ones from their first segment.
func (m *txnMachine) Reset() {
	*m = txnMachine{streams: map[uint32]struct{}{}}
}

// InTransaction reports whether an ordinary or to-be-prepared transaction is
// open.
func (m *txnMachine) InTransaction() bool { return m.state != stateNoTxn }

// InStreamBlock reports whether a stream block is open.
func (m *txnMachine) InStreamBlock() bool { return m.inBlock }

// OpenStreams is the number of streamed transactions begun and not ended.
func (m *txnMachine) OpenStreams() int { return len(m.streams) }

func orderError(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrProtocolOrder}, args...)...)
}

// Step feeds one decoded message and returns what it means.
func (m *txnMachine) Step(msg protocol.Message) (event, error) {
	switch msg := msg.(type) {
	case *protocol.Relation:
		if m.inBlock {
			return evStreamChange, nil
		}
		return evRelation, nil
	case *protocol.TypeMessage:
		if m.inBlock {
			return evStreamChange, nil
		}
		return evType, nil
	case *protocol.Origin:
		return m.stepOrigin()
	case *protocol.LogicalMessage:
		if m.inBlock {
			return evStreamChange, nil
		}
		if !msg.Transactional() {
			return evNone, nil
		}
		if m.state == stateNoTxn {
			return 0, orderError("transactional logical message outside a transaction")
		}
		return evMessage, nil
	case *protocol.Insert, *protocol.Update, *protocol.Delete, *protocol.Truncate:
		if m.inBlock {
			m.blockChange = true
			return evStreamChange, nil
		}
		if m.state == stateNoTxn {
			return 0, orderError("%s outside a transaction", msg.Type())
		}
		m.hadChanges = true
		return evChange, nil
	case *protocol.Begin:
		if err := m.needNoTxn(msg.Type()); err != nil {
			return 0, err
		}
		m.state, m.finalLSN, m.xid, m.hadChanges = stateInTxn, msg.FinalLSN, msg.Xid, false
		return evBegin, nil
	case *protocol.Commit:
		if m.state != stateInTxn || m.inBlock {
			return 0, orderError("Commit at %s without a Begin", msg.CommitLSN)
		}
		if msg.CommitLSN != m.finalLSN {
			return 0, orderError("Commit LSN %s does not match its Begin's final LSN %s (xid %d)", msg.CommitLSN, m.finalLSN, m.xid)
		}
		m.state = stateNoTxn
		return evCommit, nil
	case *protocol.BeginPrepare:
		if err := m.needNoTxn(msg.Type()); err != nil {
			return 0, err
		}
		m.state, m.finalLSN, m.xid, m.hadChanges = stateInPrepare, msg.PrepareLSN, msg.Xid, false
		return evBeginPrepare, nil
	case *protocol.Prepare:
		if m.state == stateNoTxn && !m.inBlock {
			// PostgreSQL 18 sends a Prepare alone, without Begin Prepare,
			// for a prepared transaction with nothing to decode (one that
			// only locked rows, say): an empty prepared transaction.
			return evPrepare, nil
		}
		if m.state != stateInPrepare || m.inBlock {
			return 0, orderError("Prepare of GID %q without a Begin Prepare", msg.GID)
		}
		if msg.PrepareLSN != m.finalLSN || msg.Xid != m.xid {
			return 0, orderError("Prepare (LSN %s, xid %d) does not match its Begin Prepare (LSN %s, xid %d)", msg.PrepareLSN, msg.Xid, m.finalLSN, m.xid)
		}
		m.state = stateNoTxn
		return evPrepare, nil
	case *protocol.CommitPrepared:
		if err := m.needNoTxn(msg.Type()); err != nil {
			return 0, err
		}
		return evCommitPrepared, nil
	case *protocol.RollbackPrepared:
		if err := m.needNoTxn(msg.Type()); err != nil {
			return 0, err
		}
		return evRollbackPrepared, nil
	case *protocol.StreamStart:
		if m.inBlock {
			return 0, orderError("Stream Start for xid %d inside the stream block of xid %d", msg.Xid, m.blockXid)
		}
		if m.state != stateNoTxn {
			return 0, orderError("Stream Start for xid %d inside transaction %d", msg.Xid, m.xid)
		}
		_, open := m.streams[msg.Xid]
		if msg.FirstSegment && open {
			return 0, orderError("first Stream Start for xid %d, which is already streaming", msg.Xid)
		}
		if !msg.FirstSegment && !open {
			return 0, orderError("Stream Start continues xid %d, whose first segment never came", msg.Xid)
		}
		m.streams[msg.Xid] = struct{}{}
		m.inBlock, m.blockXid, m.blockFirst, m.blockChange = true, msg.Xid, msg.FirstSegment, false
		return evStreamStart, nil
	case *protocol.StreamStop:
		if !m.inBlock {
			return 0, orderError("Stream Stop without Stream Start")
		}
		m.inBlock = false
		return evStreamStop, nil
	case *protocol.StreamCommit:
		if err := m.endStream(msg.Type(), msg.Xid); err != nil {
			return 0, err
		}
		return evStreamCommit, nil
	case *protocol.StreamPrepare:
		if err := m.endStream(msg.Type(), msg.Xid); err != nil {
			return 0, err
		}
		return evStreamPrepare, nil
	case *protocol.StreamAbort:
		if m.inBlock {
			return 0, orderError("Stream Abort for xid %d inside a stream block", msg.Xid)
		}
		if _, open := m.streams[msg.Xid]; !open {
			// Nothing of it was ever received in this session (PostgreSQL's
			// worker ignores such aborts as well).
			return evNone, nil
		}
		if msg.Toplevel() {
			delete(m.streams, msg.Xid)
		}
		return evStreamAbort, nil
	}
	return 0, orderError("unexpected message %s", msg.Type())
}

func (m *txnMachine) stepOrigin() (event, error) {
	if m.inBlock {
		if !m.blockFirst || m.blockChange {
			return 0, orderError("Origin message inside a stream block after changes")
		}
		return evOrigin, nil
	}
	if m.state == stateNoTxn {
		return 0, orderError("Origin message outside a transaction")
	}
	if m.hadChanges {
		return 0, orderError("Origin message after changes in transaction %d", m.xid)
	}
	return evOrigin, nil
}

func (m *txnMachine) needNoTxn(t protocol.MessageType) error {
	if m.inBlock {
		return orderError("%s inside the stream block of xid %d", t, m.blockXid)
	}
	if m.state != stateNoTxn {
		return orderError("%s inside transaction %d", t, m.xid)
	}
	return nil
}

func (m *txnMachine) endStream(t protocol.MessageType, xid uint32) error {
	if err := m.needNoTxn(t); err != nil {
		return err
	}
	if _, open := m.streams[xid]; !open {
		return orderError("%s for xid %d, which never streamed", t, xid)
	}
	delete(m.streams, xid)
	return nil
}
