package engine

import (
	"errors"
	"fmt"

	"github.com/walapply/walapply/protocol"
)

type txnState uint8

const (
	stateNoTxn     txnState = iota
	stateInTxn              // between Begin and Commit
	stateInPrepare          // between Begin Prepare and Prepare
)

// Machine checks the framing of the message stream and says what each
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
type Machine struct {
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

// NewMachine returns a machine in the idle state.
func NewMachine() *Machine {
	return &Machine{streams: map[uint32]struct{}{}}
}

// Reset forgets everything, as after a reconnect: the source resends every
// transaction that was not confirmed, streamed ones from their first segment.
func (m *Machine) Reset() {
	*m = Machine{streams: map[uint32]struct{}{}}
}

// InTransaction reports whether an ordinary or to-be-prepared transaction is
// open.
func (m *Machine) InTransaction() bool { return m.state != stateNoTxn }

// InOrdinary reports whether an ordinary transaction (Begin to Commit) is
// open.
func (m *Machine) InOrdinary() bool { return m.state == stateInTxn }

// InPrepare reports whether a to-be-prepared transaction (Begin Prepare to
// Prepare) is open.
func (m *Machine) InPrepare() bool { return m.state == stateInPrepare }

// AssumeOrdinary puts the machine inside an ordinary transaction that had
// no Begin: a parallel worker's applier is fed only the changes of a
// streamed transaction, whose framing the run loop's machine has checked.
func (m *Machine) AssumeOrdinary() { m.state = stateInTxn }

// InStreamBlock reports whether a stream block is open.
func (m *Machine) InStreamBlock() bool { return m.inBlock }

// OpenStreams is the number of streamed transactions begun and not ended.
func (m *Machine) OpenStreams() int { return len(m.streams) }

// ErrProtocolOrder is returned (wrapped) when messages arrive in an order the
// protocol does not allow: DML outside a transaction, a Commit that does not
// match its Begin, an Origin after changes, and so on (DESIGN.md invariant 6).
// Package apply exports it as apply.ErrProtocolOrder.
var ErrProtocolOrder = errors.New("apply: protocol messages out of order")

// OrderError is an error wrapping ErrProtocolOrder, its text formatted as
// by fmt.Sprintf.
func OrderError(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrProtocolOrder}, args...)...)
}

// Step feeds one decoded message and returns what it means.
func (m *Machine) Step(msg protocol.Message) (Event, error) {
	switch msg := msg.(type) {
	case *protocol.Relation:
		if m.inBlock {
			return EvStreamChange, nil
		}
		return EvRelation, nil
	case *protocol.TypeMessage:
		if m.inBlock {
			return EvStreamChange, nil
		}
		return EvType, nil
	case *protocol.Origin:
		return m.stepOrigin()
	case *protocol.LogicalMessage:
		if m.inBlock {
			return EvStreamChange, nil
		}
		if !msg.Transactional() {
			return EvNone, nil
		}
		if m.state == stateNoTxn {
			return 0, OrderError("transactional logical message outside a transaction")
		}
		return EvMessage, nil
	case *protocol.Insert, *protocol.Update, *protocol.Delete, *protocol.Truncate:
		if m.inBlock {
			m.blockChange = true
			return EvStreamChange, nil
		}
		if m.state == stateNoTxn {
			return 0, OrderError("%s outside a transaction", msg.Type())
		}
		m.hadChanges = true
		return EvChange, nil
	case *protocol.Begin:
		if err := m.needNoTxn(msg.Type()); err != nil {
			return 0, err
		}
		m.state, m.finalLSN, m.xid, m.hadChanges = stateInTxn, msg.FinalLSN, msg.Xid, false
		return EvBegin, nil
	case *protocol.Commit:
		if m.state != stateInTxn || m.inBlock {
			return 0, OrderError("Commit at %s without a Begin", msg.CommitLSN)
		}
		if msg.CommitLSN != m.finalLSN {
			return 0, OrderError("Commit LSN %s does not match its Begin's final LSN %s (xid %d)", msg.CommitLSN, m.finalLSN, m.xid)
		}
		m.state = stateNoTxn
		return EvCommit, nil
	case *protocol.BeginPrepare:
		if err := m.needNoTxn(msg.Type()); err != nil {
			return 0, err
		}
		m.state, m.finalLSN, m.xid, m.hadChanges = stateInPrepare, msg.PrepareLSN, msg.Xid, false
		return EvBeginPrepare, nil
	case *protocol.Prepare:
		if m.state == stateNoTxn && !m.inBlock {
			// PostgreSQL 18 sends a Prepare alone, without Begin Prepare,
			// for a prepared transaction with nothing to decode (one that
			// only locked rows, say): an empty prepared transaction.
			return EvPrepare, nil
		}
		if m.state != stateInPrepare || m.inBlock {
			return 0, OrderError("Prepare of GID %q without a Begin Prepare", msg.GID)
		}
		if msg.PrepareLSN != m.finalLSN || msg.Xid != m.xid {
			return 0, OrderError("Prepare (LSN %s, xid %d) does not match its Begin Prepare (LSN %s, xid %d)", msg.PrepareLSN, msg.Xid, m.finalLSN, m.xid)
		}
		m.state = stateNoTxn
		return EvPrepare, nil
	case *protocol.CommitPrepared:
		if err := m.needNoTxn(msg.Type()); err != nil {
			return 0, err
		}
		return EvCommitPrepared, nil
	case *protocol.RollbackPrepared:
		if err := m.needNoTxn(msg.Type()); err != nil {
			return 0, err
		}
		return EvRollbackPrepared, nil
	case *protocol.StreamStart:
		if m.inBlock {
			return 0, OrderError("Stream Start for xid %d inside the stream block of xid %d", msg.Xid, m.blockXid)
		}
		if m.state != stateNoTxn {
			return 0, OrderError("Stream Start for xid %d inside transaction %d", msg.Xid, m.xid)
		}
		_, open := m.streams[msg.Xid]
		if msg.FirstSegment && open {
			return 0, OrderError("first Stream Start for xid %d, which is already streaming", msg.Xid)
		}
		if !msg.FirstSegment && !open {
			return 0, OrderError("Stream Start continues xid %d, whose first segment never came", msg.Xid)
		}
		m.streams[msg.Xid] = struct{}{}
		m.inBlock, m.blockXid, m.blockFirst, m.blockChange = true, msg.Xid, msg.FirstSegment, false
		return EvStreamStart, nil
	case *protocol.StreamStop:
		if !m.inBlock {
			return 0, OrderError("Stream Stop without Stream Start")
		}
		m.inBlock = false
		return EvStreamStop, nil
	case *protocol.StreamCommit:
		if err := m.endStream(msg.Type(), msg.Xid); err != nil {
			return 0, err
		}
		return EvStreamCommit, nil
	case *protocol.StreamPrepare:
		if err := m.endStream(msg.Type(), msg.Xid); err != nil {
			return 0, err
		}
		return EvStreamPrepare, nil
	case *protocol.StreamAbort:
		if m.inBlock {
			return 0, OrderError("Stream Abort for xid %d inside a stream block", msg.Xid)
		}
		if _, open := m.streams[msg.Xid]; !open {
			// Nothing of it was ever received in this session (PostgreSQL's
			// worker ignores such aborts as well).
			return EvNone, nil
		}
		if msg.Toplevel() {
			delete(m.streams, msg.Xid)
		}
		return EvStreamAbort, nil
	}
	return 0, OrderError("unexpected message %s", msg.Type())
}

func (m *Machine) stepOrigin() (Event, error) {
	if m.inBlock {
		if !m.blockFirst || m.blockChange {
			return 0, OrderError("Origin message inside a stream block after changes")
		}
		return EvOrigin, nil
	}
	if m.state == stateNoTxn {
		return 0, OrderError("Origin message outside a transaction")
	}
	if m.hadChanges {
		return 0, OrderError("Origin message after changes in transaction %d", m.xid)
	}
	return EvOrigin, nil
}

func (m *Machine) needNoTxn(t protocol.MessageType) error {
	if m.inBlock {
		return OrderError("%s inside the stream block of xid %d", t, m.blockXid)
	}
	if m.state != stateNoTxn {
		return OrderError("%s inside transaction %d", t, m.xid)
	}
	return nil
}

func (m *Machine) endStream(t protocol.MessageType, xid uint32) error {
	if err := m.needNoTxn(t); err != nil {
		return err
	}
	if _, open := m.streams[xid]; !open {
		return OrderError("%s for xid %d, which never streamed", t, xid)
	}
	delete(m.streams, xid)
	return nil
}
