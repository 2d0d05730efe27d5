package engine

import (
	"errors"
	"testing"

	"github.com/walapply/walapply/protocol"
)

// step is one line of a transcript: a message and the Event (or error)
// the machine must make of it.
type step struct {
	msg     protocol.Message
	want    Event
	wantErr bool
}

func runTranscript(t *testing.T, name string, steps []step) {
	t.Helper()
	m := NewMachine()
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
			t.Fatalf("%s: step %d (%s): Event %s, want %s", name, i, s.msg.Type(), ev, s.want)
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
		{"ordinary transaction", []step{{begin, EvBegin, false}, {&protocol.Origin{Name: "o"}, EvOrigin, false},
			{rel, EvRelation, false}, {ins, EvChange, false}, {&protocol.Update{}, EvChange, false},
			{&protocol.Delete{}, EvChange, false}, {&protocol.Truncate{}, EvChange, false}, {commit, EvCommit, false}}},
		{"relation and non-transactional message outside", []step{{rel, EvRelation, false},
			{&protocol.LogicalMessage{}, EvNone, false}, {&protocol.TypeMessage{}, EvType, false}}},
		{"transactional message inside", []step{{begin, EvBegin, false}, {&protocol.LogicalMessage{Flags: 1}, EvMessage, false}, {commit, EvCommit, false}}},
		{"transactional message outside", []step{{&protocol.LogicalMessage{Flags: 1}, 0, true}}},
		{"DML outside a transaction", []step{{ins, 0, true}}},
		{"commit without begin", []step{{commit, 0, true}}},
		{"begin inside begin", []step{{begin, EvBegin, false}, {begin, 0, true}}},
		{"commit LSN mismatch", []step{{begin, EvBegin, false}, {&protocol.Commit{CommitLSN: 99, EndLSN: 120}, 0, true}}},
		{"origin after changes", []step{{begin, EvBegin, false}, {ins, EvChange, false}, {&protocol.Origin{}, 0, true}}},
		{"origin outside", []step{{&protocol.Origin{}, 0, true}}},
		{"stream interleaved with a transaction", []step{
			{ss(5, true), EvStreamStart, false}, {&protocol.Origin{}, EvOrigin, false}, {rel, EvStreamChange, false},
			{ins, EvStreamChange, false}, {stop, EvStreamStop, false},
			{begin, EvBegin, false}, {ins, EvChange, false}, {commit, EvCommit, false},
			{ss(6, true), EvStreamStart, false}, {ins, EvStreamChange, false}, {stop, EvStreamStop, false},
			{ss(5, false), EvStreamStart, false}, {ins, EvStreamChange, false}, {stop, EvStreamStop, false},
			{&protocol.StreamAbort{Xid: 5, SubXid: 9}, EvStreamAbort, false},
			{&protocol.StreamCommit{Xid: 5}, EvStreamCommit, false},
			{&protocol.StreamAbort{Xid: 6, SubXid: 6}, EvStreamAbort, false},
			{&protocol.StreamAbort{Xid: 6, SubXid: 6}, EvNone, false}, // already gone
		}},
		{"stream stop without start", []step{{stop, 0, true}}},
		{"nested stream start", []step{{ss(5, true), EvStreamStart, false}, {ss(6, true), 0, true}}},
		{"first segment twice", []step{{ss(5, true), EvStreamStart, false}, {stop, EvStreamStop, false}, {ss(5, true), 0, true}}},
		{"continuation without first", []step{{ss(5, false), 0, true}}},
		{"stream commit inside block", []step{{ss(5, true), EvStreamStart, false}, {&protocol.StreamCommit{Xid: 5}, 0, true}}},
		{"stream commit unknown xid", []step{{&protocol.StreamCommit{Xid: 5}, 0, true}}},
		{"begin inside block", []step{{ss(5, true), EvStreamStart, false}, {begin, 0, true}}},
		{"origin in later segment", []step{{ss(5, true), EvStreamStart, false}, {stop, EvStreamStop, false},
			{ss(5, false), EvStreamStart, false}, {&protocol.Origin{}, 0, true}}},
		{"two-phase", []step{
			{&protocol.BeginPrepare{PrepareLSN: 50, Xid: 3, GID: "g"}, EvBeginPrepare, false}, {ins, EvChange, false},
			{&protocol.Prepare{PrepareLSN: 50, Xid: 3, GID: "g"}, EvPrepare, false},
			{&protocol.CommitPrepared{Xid: 3, GID: "g"}, EvCommitPrepared, false},
			{&protocol.RollbackPrepared{Xid: 4, GID: "h"}, EvRollbackPrepared, false},
			{ss(8, true), EvStreamStart, false}, {stop, EvStreamStop, false},
			{&protocol.StreamPrepare{Xid: 8}, EvStreamPrepare, false},
		}},
		{"prepare mismatch", []step{{&protocol.BeginPrepare{PrepareLSN: 50, Xid: 3}, EvBeginPrepare, false},
			{&protocol.Prepare{PrepareLSN: 51, Xid: 3}, 0, true}}},
		{"commit prepared inside a transaction", []step{{begin, EvBegin, false}, {&protocol.CommitPrepared{}, 0, true}}},
		{"stream start inside a transaction", []step{{begin, EvBegin, false}, {ss(5, true), 0, true}}},
	}
	for _, tc := range tests {
		runTranscript(t, tc.name, tc.steps)
	}
}

func TestTxnMachineReset(t *testing.T) {
	m := NewMachine()
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

// TestTxnMachineLonePrepare: PostgreSQL 18 sends a Prepare without Begin
// Prepare for a prepared transaction with nothing to decode; it is accepted
// between transactions, never inside one or inside a stream block.
func TestTxnMachineLonePrepare(t *testing.T) {
	lone := &protocol.Prepare{PrepareLSN: 70, EndLSN: 80, Xid: 9, GID: "lock only"}
	m := NewMachine()
	if ev, err := m.Step(lone); err != nil || ev != EvPrepare {
		t.Fatalf("lone Prepare: %v, %v", ev, err)
	}
	if m.InTransaction() {
		t.Fatal("a lone Prepare opened a transaction")
	}
	if _, err := m.Step(&protocol.Begin{FinalLSN: 90, Xid: 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Step(lone); err == nil {
		t.Error("a Prepare inside an ordinary transaction was accepted")
	}
	m.Reset()
	if _, err := m.Step(&protocol.StreamStart{Xid: 11, FirstSegment: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Step(lone); err == nil {
		t.Error("a Prepare inside a stream block was accepted")
	}
}
