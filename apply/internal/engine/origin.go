package engine

import "github.com/walapply/walapply/protocol"

// OriginTracker follows the Origin messages of the stream to tell, for
// the run loop's Progress, which origin the last transaction received in full came from.
// It sees every decoded message with its event, after the applier has
// accepted it, so the framing is already checked.
type OriginTracker struct {
	cur      string            // origin of the open ordinary or to-be-prepared transaction
	inBlock  bool              // a stream block is open ...
	blockXid uint32            // ... for this top-level transaction
	streamed map[uint32]string // origins of streamed transactions not yet ended
	last     string
}

// Observe updates the tracker with one handled message and its event.
func (t *OriginTracker) Observe(ev Event, msg protocol.Message) {
	switch ev {
	case EvBegin, EvBeginPrepare:
		t.cur = ""
	case EvOrigin:
		name := msg.(*protocol.Origin).Name
		if !t.inBlock {
			t.cur = name
			return
		}
		// pgoutput sends it once, in the transaction's first block.
		if t.streamed == nil {
			t.streamed = make(map[uint32]string)
		}
		t.streamed[t.blockXid] = name
	case EvCommit, EvPrepare:
		t.last = t.cur
	case EvStreamStart:
		t.inBlock, t.blockXid = true, msg.(*protocol.StreamStart).Xid
	case EvStreamStop:
		t.inBlock = false
	case EvStreamCommit:
		xid := msg.(*protocol.StreamCommit).Xid
		t.last = t.streamed[xid]
		delete(t.streamed, xid)
	case EvStreamPrepare:
		xid := msg.(*protocol.StreamPrepare).Xid
		t.last = t.streamed[xid]
		delete(t.streamed, xid)
	case EvStreamAbort:
		if m := msg.(*protocol.StreamAbort); m.Toplevel() {
			delete(t.streamed, m.Xid)
		}
	}
}

// Last is the origin of the last transaction received in full ("" when it
// had no Origin message).
func (t *OriginTracker) Last() string { return t.last }
