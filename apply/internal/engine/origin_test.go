package engine

import (
	"testing"

	"github.com/walapply/walapply/protocol"
)

// TestOriginTracker feeds transcripts through the transaction machine and
// the tracker, checking after each message which origin Progress would
// report for the last transaction received in full.
func TestOriginTracker(t *testing.T) {
	begin := func(xid uint32, final protocol.LSN) *protocol.Begin {
		return &protocol.Begin{FinalLSN: final, Xid: xid}
	}
	commit := func(final protocol.LSN) *protocol.Commit {
		return &protocol.Commit{CommitLSN: final, EndLSN: final + 8}
	}
	origin := func(name string) *protocol.Origin { return &protocol.Origin{Name: name} }
	ins := &protocol.Insert{RelationID: 1}
	ss := func(xid uint32, first bool) *protocol.StreamStart {
		return &protocol.StreamStart{Xid: xid, FirstSegment: first}
	}
	stop := &protocol.StreamStop{}
	type step struct {
		msg  protocol.Message
		last string // LastOrigin after the message
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"ordinary", []step{
			{begin(1, 100), ""}, {origin("walapply_ab"), ""}, {ins, ""}, {commit(100), "walapply_ab"},
			{begin(2, 200), "walapply_ab"}, {ins, "walapply_ab"}, {commit(200), ""},
			{begin(3, 300), ""}, {origin("pg_16384"), ""}, {commit(300), "pg_16384"},
		}},
		{"streamed, interleaved", []step{
			{ss(10, true), ""}, {origin("o_stream"), ""}, {ins, ""}, {stop, ""},
			{begin(4, 400), ""}, {origin("o_plain"), ""}, {ins, ""}, {commit(400), "o_plain"},
			{ss(11, true), "o_plain"}, {ins, "o_plain"}, {stop, "o_plain"},
			{ss(10, false), "o_plain"}, {ins, "o_plain"}, {stop, "o_plain"},
			{&protocol.StreamCommit{Xid: 10, CommitLSN: 500, EndLSN: 508}, "o_stream"},
			{&protocol.StreamCommit{Xid: 11, CommitLSN: 600, EndLSN: 608}, ""},
		}},
		{"streamed and aborted", []step{
			{begin(5, 100), ""}, {origin("kept"), ""}, {commit(100), "kept"},
			{ss(12, true), "kept"}, {origin("dropped"), "kept"}, {ins, "kept"}, {stop, "kept"},
			{&protocol.StreamAbort{Xid: 12, SubXid: 12}, "kept"},
		}},
		{"two-phase", []step{
			{&protocol.BeginPrepare{PrepareLSN: 50, Xid: 3, GID: "g"}, ""}, {origin("walapply_x"), ""}, {ins, ""},
			{&protocol.Prepare{PrepareLSN: 50, Xid: 3, GID: "g"}, "walapply_x"},
			{&protocol.CommitPrepared{Xid: 3, GID: "g"}, "walapply_x"},
			{ss(8, true), "walapply_x"}, {origin("walapply_y"), "walapply_x"}, {stop, "walapply_x"},
			{&protocol.StreamPrepare{Xid: 8}, "walapply_y"},
		}},
	}
	for _, tc := range tests {
		m := NewMachine()
		var tr OriginTracker
		for i, s := range tc.steps {
			ev, err := m.Step(s.msg)
			if err != nil {
				t.Fatalf("%s: step %d (%s): %v", tc.name, i, s.msg.Type(), err)
			}
			tr.Observe(ev, s.msg)
			if tr.last != s.last {
				t.Errorf("%s: after step %d (%s): last origin %q, want %q", tc.name, i, s.msg.Type(), tr.last, s.last)
			}
		}
		if len(tr.streamed) != 0 {
			t.Errorf("%s: streamed origins left behind: %v", tc.name, tr.streamed)
		}
	}
}
