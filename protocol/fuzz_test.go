package protocol_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/walapply/walapply/protocol"
	pt "github.com/walapply/walapply/protocol/protocoltest"
)

// sentinels are the error classes a DecodeError may wrap; every decoding
// error wraps exactly one.
var sentinels = []error{
	protocol.ErrShortMessage, protocol.ErrTrailingBytes, protocol.ErrUnknownMessageType,
	protocol.ErrWrongMessageType, protocol.ErrUnknownTupleKind, protocol.ErrNonzeroFlags,
	protocol.ErrInvalidLSN, protocol.ErrInvalidXid, protocol.ErrBadMarker, protocol.ErrBadLength,
	protocol.ErrInvalidValue, protocol.ErrUnsupportedByVersion, protocol.ErrStreamFraming,
}

// checkError fails t unless err is a well-formed *DecodeError for a message
// of n bytes and type typ (0: any) wrapping exactly one sentinel.
func checkError(t *testing.T, err error, typ protocol.MessageType, n int) {
	t.Helper()
	var de *protocol.DecodeError
	if !errors.As(err, &de) {
		t.Fatalf("error %v (%T) is not a *DecodeError", err, err)
	}
	if typ != 0 && de.Message != typ {
		t.Fatalf("DecodeError.Message = %v, want %v: %v", de.Message, typ, err)
	}
	if de.Offset < 0 || de.Offset > n {
		t.Fatalf("DecodeError.Offset %d outside the %d-byte message: %v", de.Offset, n, err)
	}
	count := 0
	for _, s := range sentinels {
		if errors.Is(err, s) {
			count++
		}
	}
	if count != 1 {
		t.Fatalf("error wraps %d sentinels, want 1: %v", count, err)
	}
	if err.Error() == "" {
		t.Fatal("empty error text")
	}
}

// checkDecode decodes src into m and checks the result: an error must be
// well formed, a success must have consumed exactly src, which the
// re-encoding shows.
func checkDecode(t *testing.T, m protocol.Message, src []byte) {
	t.Helper()
	if err := m.Decode(src); err != nil {
		checkError(t, err, m.Type(), len(src))
		return
	}
	if enc := pt.Encode(m); !bytes.Equal(enc, src) {
		t.Fatalf("decoded %#v\nre-encodes to % x\n        from % x", m, enc, src)
	}
}

// fuzzTarget describes the fuzz test of one message type.
type fuzzTarget struct {
	name  string
	seeds []goldenCase
	// blank returns the value to decode into. Types with an input flag
	// (Streamed, WithAbortInfo) take it from the fuzzer.
	blank   func(flag bool) protocol.Message
	flagged bool
}

func unflagged[T any, P interface {
	*T
	protocol.Message
}]() func(bool) protocol.Message {
	return func(bool) protocol.Message { return P(new(T)) }
}

var fuzzTargets = []fuzzTarget{
	{name: "FuzzBegin", seeds: goldenBegin, blank: unflagged[protocol.Begin]()},
	{name: "FuzzCommit", seeds: goldenCommit, blank: unflagged[protocol.Commit]()},
	{name: "FuzzOrigin", seeds: goldenOrigin, blank: unflagged[protocol.Origin]()},
	{name: "FuzzRelation", seeds: goldenRelation, flagged: true, blank: func(f bool) protocol.Message { return &protocol.Relation{Streamed: f} }},
	{name: "FuzzType", seeds: goldenType, flagged: true, blank: func(f bool) protocol.Message { return &protocol.TypeMessage{Streamed: f} }},
	{name: "FuzzInsert", seeds: goldenInsert, flagged: true, blank: func(f bool) protocol.Message { return &protocol.Insert{Streamed: f} }},
	{name: "FuzzUpdate", seeds: goldenUpdate, flagged: true, blank: func(f bool) protocol.Message { return &protocol.Update{Streamed: f} }},
	{name: "FuzzDelete", seeds: goldenDelete, flagged: true, blank: func(f bool) protocol.Message { return &protocol.Delete{Streamed: f} }},
	{name: "FuzzTruncate", seeds: goldenTruncate, flagged: true, blank: func(f bool) protocol.Message { return &protocol.Truncate{Streamed: f} }},
	{name: "FuzzLogicalMessage", seeds: goldenLogicalMessage, flagged: true, blank: func(f bool) protocol.Message { return &protocol.LogicalMessage{Streamed: f} }},
	{name: "FuzzStreamStart", seeds: goldenStreamStart, blank: unflagged[protocol.StreamStart]()},
	{name: "FuzzStreamStop", seeds: goldenStreamStop, blank: unflagged[protocol.StreamStop]()},
	{name: "FuzzStreamCommit", seeds: goldenStreamCommit, blank: unflagged[protocol.StreamCommit]()},
	{name: "FuzzStreamAbort", seeds: goldenStreamAbort, flagged: true, blank: func(f bool) protocol.Message { return &protocol.StreamAbort{WithAbortInfo: f} }},
	{name: "FuzzBeginPrepare", seeds: goldenBeginPrepare, blank: unflagged[protocol.BeginPrepare]()},
	{name: "FuzzPrepare", seeds: goldenPrepare, blank: unflagged[protocol.Prepare]()},
	{name: "FuzzStreamPrepare", seeds: goldenStreamPrepare, blank: unflagged[protocol.StreamPrepare]()},
	{name: "FuzzCommitPrepared", seeds: goldenCommitPrepared, blank: unflagged[protocol.CommitPrepared]()},
	{name: "FuzzRollbackPrepared", seeds: goldenRollbackPrepared, blank: unflagged[protocol.RollbackPrepared]()},
}

// fuzzSeeds returns the seed inputs of a target: each golden message with
// its flag (for flagged targets), and the same message with the flag
// flipped, which must fail cleanly.
func (ft fuzzTarget) fuzzSeeds() []fuzzSeed {
	var seeds []fuzzSeed
	for _, gc := range ft.seeds {
		if !ft.flagged {
			seeds = append(seeds, fuzzSeed{gc.name, []any{gc.src}})
			continue
		}
		flag, _ := streamedOf(gc.want)
		if sa, ok := gc.want.(*protocol.StreamAbort); ok {
			flag = sa.WithAbortInfo
		}
		seeds = append(seeds, fuzzSeed{gc.name, []any{flag, gc.src}}, fuzzSeed{gc.name + " flag flipped", []any{!flag, gc.src}})
	}
	return seeds
}

// fuzzSeed is one seed input of a fuzz test, named for its corpus file.
type fuzzSeed struct {
	name string
	args []any
}

func runFuzzTarget(f *testing.F, name string) {
	var ft fuzzTarget
	for _, t := range fuzzTargets {
		if t.name == name {
			ft = t
		}
	}
	if ft.name == "" {
		f.Fatalf("no fuzz target %s", name)
	}
	for _, s := range ft.fuzzSeeds() {
		f.Add(s.args...)
	}
	if ft.flagged {
		f.Fuzz(func(t *testing.T, flag bool, src []byte) {
			m := ft.blank(flag)
			checkDecode(t, m, src)
			checkDecode(t, m, src) // again, into a used value
		})
		return
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		m := ft.blank(false)
		checkDecode(t, m, src)
		checkDecode(t, m, src)
	})
}

func FuzzBegin(f *testing.F)            { runFuzzTarget(f, "FuzzBegin") }
func FuzzCommit(f *testing.F)           { runFuzzTarget(f, "FuzzCommit") }
func FuzzOrigin(f *testing.F)           { runFuzzTarget(f, "FuzzOrigin") }
func FuzzRelation(f *testing.F)         { runFuzzTarget(f, "FuzzRelation") }
func FuzzType(f *testing.F)             { runFuzzTarget(f, "FuzzType") }
func FuzzInsert(f *testing.F)           { runFuzzTarget(f, "FuzzInsert") }
func FuzzUpdate(f *testing.F)           { runFuzzTarget(f, "FuzzUpdate") }
func FuzzDelete(f *testing.F)           { runFuzzTarget(f, "FuzzDelete") }
func FuzzTruncate(f *testing.F)         { runFuzzTarget(f, "FuzzTruncate") }
func FuzzLogicalMessage(f *testing.F)   { runFuzzTarget(f, "FuzzLogicalMessage") }
func FuzzStreamStart(f *testing.F)      { runFuzzTarget(f, "FuzzStreamStart") }
func FuzzStreamStop(f *testing.F)       { runFuzzTarget(f, "FuzzStreamStop") }
func FuzzStreamCommit(f *testing.F)     { runFuzzTarget(f, "FuzzStreamCommit") }
func FuzzStreamAbort(f *testing.F)      { runFuzzTarget(f, "FuzzStreamAbort") }
func FuzzBeginPrepare(f *testing.F)     { runFuzzTarget(f, "FuzzBeginPrepare") }
func FuzzPrepare(f *testing.F)          { runFuzzTarget(f, "FuzzPrepare") }
func FuzzStreamPrepare(f *testing.F)    { runFuzzTarget(f, "FuzzStreamPrepare") }
func FuzzCommitPrepared(f *testing.F)   { runFuzzTarget(f, "FuzzCommitPrepared") }
func FuzzRollbackPrepared(f *testing.F) { runFuzzTarget(f, "FuzzRollbackPrepared") }
