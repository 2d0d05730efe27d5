package protocol_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/walapply/walapply/protocol"
	pt "github.com/walapply/walapply/protocol/protocoltest"
)

func TestNewDecoder(t *testing.T) {
	for _, tc := range []struct {
		opts protocol.DecoderOptions
		ok   bool
	}{
		{protocol.DecoderOptions{ProtoVersion: 0}, false},
		{protocol.DecoderOptions{ProtoVersion: -1}, false},
		{protocol.DecoderOptions{ProtoVersion: 1}, true},
		{protocol.DecoderOptions{ProtoVersion: 2}, true},
		{protocol.DecoderOptions{ProtoVersion: 3}, true},
		{protocol.DecoderOptions{ProtoVersion: 4}, true},
		{protocol.DecoderOptions{ProtoVersion: 5}, false},
		{protocol.DecoderOptions{ProtoVersion: 4, StreamingParallel: true}, true},
		{protocol.DecoderOptions{ProtoVersion: 3, StreamingParallel: true}, false},
	} {
		d, err := protocol.NewDecoder(tc.opts)
		if tc.ok != (err == nil) || tc.ok != (d != nil) {
			t.Errorf("NewDecoder(%+v) = %v, %v; want ok = %v", tc.opts, d, err, tc.ok)
		}
		if d != nil && (d.Options() != tc.opts || d.InStream() || d.StreamXid() != 0) {
			t.Errorf("NewDecoder(%+v): Options %+v, InStream %v, StreamXid %d", tc.opts, d.Options(), d.InStream(), d.StreamXid())
		}
	}
}

func newDecoder(t testing.TB, version int, parallel bool) *protocol.Decoder {
	t.Helper()
	d, err := protocol.NewDecoder(protocol.DecoderOptions{ProtoVersion: version, StreamingParallel: parallel})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// step is one message of a transcript and what the Decoder must make of it.
type step struct {
	src       []byte
	err       error // nil: must decode to a message of type src[0]
	inStream  bool  // InStream() afterwards
	streamXid uint32
	streamed  bool // Streamed of the result, for the types that have it
}

func ok(src []byte) step { return step{src: src} }
func okIn(src []byte, xid uint32) step {
	return step{src: src, inStream: true, streamXid: xid, streamed: true}
}
func fails(src []byte, err error, inStream bool, xid uint32) step {
	return step{src: src, err: err, inStream: inStream, streamXid: xid}
}

// streamedOf returns the Streamed / WithAbortInfo flag of m.
func streamedOf(m protocol.Message) (flag, has bool) {
	switch m := m.(type) {
	case *protocol.Relation:
		return m.Streamed, true
	case *protocol.TypeMessage:
		return m.Streamed, true
	case *protocol.Insert:
		return m.Streamed, true
	case *protocol.Update:
		return m.Streamed, true
	case *protocol.Delete:
		return m.Streamed, true
	case *protocol.Truncate:
		return m.Streamed, true
	case *protocol.LogicalMessage:
		return m.Streamed, true
	}
	return false, false
}

func runTranscript(t *testing.T, d *protocol.Decoder, steps []step) {
	t.Helper()
	for i, s := range steps {
		m, err := d.Decode(s.src)
		what := fmt.Sprintf("step %d (% x)", i, s.src)
		switch {
		case s.err == nil && err != nil:
			t.Fatalf("%s: %v", what, err)
		case s.err != nil && !errors.Is(err, s.err):
			t.Fatalf("%s: got error %v, want %v", what, err, s.err)
		case s.err != nil && m != nil:
			t.Fatalf("%s: error %v came with a message %#v", what, err, m)
		case s.err == nil && m.Type() != protocol.MessageType(s.src[0]):
			t.Fatalf("%s: decoded %v", what, m.Type())
		}
		if s.err == nil {
			if flag, has := streamedOf(m); has && flag != s.streamed {
				t.Errorf("%s: Streamed = %v, want %v", what, flag, s.streamed)
			}
		}
		if d.InStream() != s.inStream || d.StreamXid() != s.streamXid {
			t.Fatalf("%s: InStream %v, StreamXid %d; want %v, %d", what, d.InStream(), d.StreamXid(), s.inStream, s.streamXid)
		}
	}
}

var (
	relCols  = []protocol.RelationColumn{pt.Column("id", 23, true), pt.Column("v", 25, false)}
	row1     = []pt.Col{pt.Text("1"), pt.Text("a")}
	row1Key  = []pt.Col{pt.Text("1"), pt.Null()}
	gid      = "g1"
	lsnC     = lsnB + 0x100
	lsnD     = lsnB + 0x200
	rel      = uint32(16384)
	topXid   = uint32(741)
	subXid   = uint32(742)
	otherXid = uint32(900)
)

func TestDecoderPlainTransaction(t *testing.T) {
	for v := 1; v <= 4; v++ {
		t.Run(fmt.Sprintf("proto %d", v), func(t *testing.T) {
			runTranscript(t, newDecoder(t, v, false), []step{
				ok(pt.Begin(lsnA, ts1, topXid)),
				ok(pt.Origin(lsnC, "upstream")),
				ok(pt.Type(16400, 0, "public", "mood")),
				ok(pt.Relation(rel, 0, "public", "t", protocol.ReplicaIdentityDefault, relCols...)),
				ok(pt.Insert(rel, 0, row1...)),
				ok(pt.Update(rel, 0, row1...)),
				ok(pt.UpdateOld(rel, 0, protocol.TupleOldKey, row1Key, row1)),
				ok(pt.Delete(rel, 0, protocol.TupleOldKey, row1Key...)),
				ok(pt.Truncate(0, protocol.TruncateCascade, rel)),
				ok(pt.Message(0, true, lsnA, "p", []byte("x"))),
				ok(pt.Commit(lsnA, lsnB, ts1)),
				ok(pt.Message(0, false, lsnC, "p", nil)),
			})
		})
	}
}

func TestDecoderStreamedTransaction(t *testing.T) {
	for v := 2; v <= 4; v++ {
		t.Run(fmt.Sprintf("proto %d", v), func(t *testing.T) {
			runTranscript(t, newDecoder(t, v, false), []step{
				okIn(pt.StreamStart(topXid, true), topXid),
				okIn(pt.Origin(0, "upstream"), topXid), // no xid on Origin
				okIn(pt.Type(16400, topXid, "public", "mood"), topXid),
				okIn(pt.Relation(rel, topXid, "public", "t", protocol.ReplicaIdentityFull, relCols...), topXid),
				okIn(pt.Insert(rel, topXid, row1...), topXid),
				okIn(pt.Insert(rel, subXid, row1...), topXid), // a subtransaction's change
				okIn(pt.Message(subXid, true, lsnA, "p", []byte("x")), topXid),
				{src: pt.StreamStop()},
				// An ordinary transaction between two blocks of the
				// streamed one.
				ok(pt.Begin(lsnC, ts1, otherXid)),
				ok(pt.Insert(rel, 0, row1...)),
				ok(pt.Commit(lsnC, lsnD, ts1)),
				okIn(pt.StreamStart(topXid, false), topXid),
				okIn(pt.UpdateOld(rel, topXid, protocol.TupleOld, row1, row1), topXid),
				okIn(pt.Delete(rel, subXid, protocol.TupleOld, row1...), topXid),
				okIn(pt.Truncate(topXid, 0, rel), topXid),
				{src: pt.StreamStop()},
				ok(pt.StreamAbort(topXid, subXid)),
				ok(pt.StreamCommit(topXid, lsnA, lsnB, ts1)),
				ok(pt.Insert(rel, 0, row1...)), // not streamed any more
			})
		})
	}
}

func TestDecoderStreamAbortVariants(t *testing.T) {
	t.Run("parallel reads 25 bytes", func(t *testing.T) {
		d := newDecoder(t, 4, true)
		m, err := d.Decode(pt.StreamAbortParallel(topXid, subXid, lsnA, ts2))
		if err != nil {
			t.Fatal(err)
		}
		want := protocol.StreamAbort{WithAbortInfo: true, Xid: topXid, SubXid: subXid, AbortLSN: lsnA, AbortTime: ts2}
		if got := *m.(*protocol.StreamAbort); got != want {
			t.Fatalf("got %+v, want %+v", got, want)
		}
		runTranscript(t, d, []step{fails(pt.StreamAbort(topXid, subXid), protocol.ErrShortMessage, false, 0)})
	})
	for v := 2; v <= 4; v++ {
		t.Run(fmt.Sprintf("proto %d without parallel reads 9 bytes", v), func(t *testing.T) {
			d := newDecoder(t, v, false)
			m, err := d.Decode(pt.StreamAbort(topXid, topXid))
			if err != nil {
				t.Fatal(err)
			}
			want := protocol.StreamAbort{Xid: topXid, SubXid: topXid}
			if got := *m.(*protocol.StreamAbort); got != want {
				t.Fatalf("got %+v, want %+v", got, want)
			}
			runTranscript(t, d, []step{fails(pt.StreamAbortParallel(topXid, subXid, lsnA, ts2), protocol.ErrTrailingBytes, false, 0)})
		})
	}
}

func TestDecoderTwoPhase(t *testing.T) {
	for v := 3; v <= 4; v++ {
		t.Run(fmt.Sprintf("proto %d", v), func(t *testing.T) {
			runTranscript(t, newDecoder(t, v, false), []step{
				ok(pt.BeginPrepare(lsnA, lsnB, ts1, topXid, gid)),
				ok(pt.Insert(rel, 0, row1...)),
				ok(pt.Prepare(lsnA, lsnB, ts1, topXid, gid)),
				ok(pt.CommitPrepared(lsnC, lsnD, ts2, topXid, gid)),
				okIn(pt.StreamStart(otherXid, true), otherXid),
				okIn(pt.Insert(rel, otherXid, row1...), otherXid),
				{src: pt.StreamStop()},
				ok(pt.StreamPrepare(lsnA, lsnB, ts1, otherXid, gid)),
				ok(pt.RollbackPrepared(lsnB, lsnD, ts1, ts2, otherXid, gid)),
			})
		})
	}
}
