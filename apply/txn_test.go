package apply

import (
	"errors"
	"testing"

	"github.com/walapply/walapply/protocol"
)

// step is one line of a transcript: a message and the event (or error)
// the machine must make of it.
type step struct {
	msg     protocol.Message
	want    event
	wantErr bool
}

func runTranscript(t *testing.T, name string, steps []step) {
	t.Helper()
	m := newTxnMachine()
	for i, s := range steps {
		ev, err := m.Step(s.msg)
		if s.wantErr {
			if err == nil {
				t.Errorf("%s: step %d (%s): no error, want a protocol order error", name, i, s.msg.Type())
			} else if !errors.Is(err, ErrProtocolOrder) {
				t.Errorf("%s: step %d: error %v does not wrap ErrProtocolOrder", name, i, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("%s: step %d (%s): unexpected error %v", name, i, s.msg.Type(), err)
		}
		if ev != s.want {
			t.Fatalf("%s: step %d (%s): event %s, want %s", name, i, s.msg.Type(), ev, s.want)
		}
	}
}

func TestTxnMachineTranscripts(t *testing.T) {
	begin := &protocol.Begin{FinalLSN: 100, Xid: 7}
	commit := &protocol.Commit{CommitLSN: 100, EndLSN: 120}
	ins := &protocol.Insert{RelationID: 1}
	rel := &protocol.Relation{RelationID: 1}
	ss := func(xid uint32, first bool) *protocol.StreamStart {
		return &protocol.StreamStart{Xid: xid, FirstSegment: first}
	}
	stop := &protocol.StreamStop{}
	tests := []struct {
		name  string
		steps []step
	}{
		{"ordinary transaction", []step{{begin, evBegin, false}, {&protocol.Origin{Name: "o"}, evOrigin, false},
			{rel, evRelation, false}, {ins, evChange, false}, {&protocol.Update{}, evChange, false},
			{&protocol.Delete{}, evChange, false}, {&protocol.Truncate{}, evChange, false}, {commit, evCommit, false}}},
		{"relation and non-transactional message outside", []step{{rel, evRelation, false},
			{&protocol.LogicalMessage{}, evNone, false}, {&protocol.TypeMessage{}, evType, false}}},
		{"transactional message inside", []step{{begin, evBegin, false}, {&protocol.LogicalMessage{Flags: 1}, evMessage, false}, {commit, evCommit, false}}},
		{"transactional message outside", []step{{&protocol.LogicalMessage{Flags: 1}, 0, true}}},
		{"DML outside a transaction", []step{{ins, 0, true}}},
		{"commit without begin", []step{{commit, 0, true}}},
		{"begin inside begin", []step{{begin, evBegin, false}, {begin, 0, true}}},
		{"commit LSN mismatch", []step{{begin, evBegin, false}, {&protocol.Commit{CommitLSN: 99, EndLSN: 120}, 0, true}}},
		{"origin after changes", []step{{begin, evBegin, false}, {ins, evChange, false}, {&protocol.Origin{}, 0, true}}},
		{"origin outside", []step{{&protocol.Origin{}, 0, true}}},
		{"stream interleaved with a transaction", []step{
			{ss(5, true), evStreamStart, false}, {&protocol.Origin{}, evOrigin, false}, {rel, evStreamChange, false},
			{ins, evStreamChange, false}, {stop, evStreamStop, false},
			{begin, evBegin, false}, {ins, evChange, false}, {commit, evCommit, false},
			{ss(6, true), evStreamStart, false}, {ins, evStreamChange, false}, {stop, evStreamStop, false},
			{ss(5, false), evStreamStart, false}, {ins, evStreamChange, false}, {stop, evStreamStop, false},
			{&protocol.StreamAbort{Xid: 5, SubXid: 9}, evStreamAbort, false},
			{&protocol.StreamCommit{Xid: 5}, evStreamCommit, false},
			{&protocol.StreamAbort{Xid: 6, SubXid: 6}, evStreamAbort, false},
			{&protocol.StreamAbort{Xid: 6, SubXid: 6}, evNone, false}, // already gone
		}},
		{"stream stop without start", []step{{stop, 0, true}}},
		{"nested stream start", []step{{ss(5, true), evStreamStart, false}, {ss(6, true), 0, true}}},
		{"first segment twice", []step{{ss(5, true), evStreamStart, false}, {stop, evStreamStop, false}, {ss(5, true), 0, true}}},
		{"continuation without first", []step{{ss(5, false), 0, true}}},
		{"stream commit inside block", []step{{ss(5, true), evStreamStart, false}, {&protocol.StreamCommit{Xid: 5}, 0, true}}},
		{"stream commit unknown xid", []step{{&protocol.StreamCommit{Xid: 5}, 0, true}}},
		{"begin inside block", []step{{ss(5, true), evStreamStart, false}, {begin, 0, true}}},
		{"origin in later segment", []step{{ss(5, true), evStreamStart, false}, {stop, evStreamStop, false},
			{ss(5, false), evStreamStart, false}, {&protocol.Origin{}, 0, true}}},
		{"two-phase", []step{
			{&protocol.BeginPrepare{PrepareLSN: 50, Xid: 3, GID: "g"}, evBeginPrepare, false}, {ins, evChange, false},
			{&protocol.Prepare{PrepareLSN: 50, Xid: 3, GID: "g"}, evPrepare, false},
			{&protocol.CommitPrepared{Xid: 3, GID: "g"}, evCommitPrepared, false},
			{&protocol.RollbackPrepared{Xid: 4, GID: "h"}, evRollbackPrepared, false},
			{ss(8, true), evStreamStart, false}, {stop, evStreamStop, false},
			{&protocol.StreamPrepare{Xid: 8}, evStreamPrepare, false},
		}},
		{"prepare mismatch", []step{{&protocol.BeginPrepare{PrepareLSN: 50, Xid: 3}, evBeginPrepare, false},
			{&protocol.Prepare{PrepareLSN: 51, Xid: 3}, 0, true}}},
		{"commit prepared inside a transaction", []step{{begin, evBegin, false}, {&protocol.CommitPrepared{}, 0, true}}},
		{"stream start inside a transaction", []step{{begin, evBegin, false}, {ss(5, true), 0, true}}},
	}
	for _, tc := range tests {
		runTranscript(t, tc.name, tc.steps)
	}
}

func TestTxnMachineReset(t *testing.T) {
	m := newTxnMachine()
	if _, err := m.Step(&protocol.StreamStart{Xid: 5, FirstSegment: true}); err != nil {
		t.Fatal(err)
	}
	if !m.InStreamBlock() || m.OpenStreams() != 1 {
		t.Fatalf("in block %v, open %d", m.InStreamBlock(), m.OpenStreams())
	}
	m.Reset()
	if m.InStreamBlock() || m.OpenStreams() != 0 || m.InTransaction() {
		t.Fatal("Reset left state behind")
	}
	// After a reconnect the source resends streamed transactions from the first segment.
	if _, err := m.Step(&protocol.StreamStart{Xid: 5, FirstSegment: true}); err != nil {
		t.Fatal(err)
	}
}
