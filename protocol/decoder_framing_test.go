package protocol_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/walapply/walapply/protocol"
	pt "github.com/walapply/walapply/protocol/protocoltest"
)

// oneOfEach is a valid message of every type, decodable outside a stream
// block except Stream Stop (which needs to be inside one). The changes are
// not streamed.
func oneOfEach() map[protocol.MessageType][]byte {
	return map[protocol.MessageType][]byte{
		protocol.MessageTypeBegin:            pt.Begin(lsnA, ts1, topXid),
		protocol.MessageTypeMessage:          pt.Message(0, false, lsnA, "p", nil),
		protocol.MessageTypeCommit:           pt.Commit(lsnA, lsnB, ts1),
		protocol.MessageTypeOrigin:           pt.Origin(lsnA, "o"),
		protocol.MessageTypeRelation:         pt.Relation(rel, 0, "public", "t", protocol.ReplicaIdentityDefault, relCols...),
		protocol.MessageTypeType:             pt.Type(16400, 0, "public", "mood"),
		protocol.MessageTypeInsert:           pt.Insert(rel, 0, row1...),
		protocol.MessageTypeUpdate:           pt.Update(rel, 0, row1...),
		protocol.MessageTypeDelete:           pt.Delete(rel, 0, protocol.TupleOldKey, row1Key...),
		protocol.MessageTypeTruncate:         pt.Truncate(0, 0, rel),
		protocol.MessageTypeStreamStart:      pt.StreamStart(topXid, true),
		protocol.MessageTypeStreamStop:       pt.StreamStop(),
		protocol.MessageTypeStreamCommit:     pt.StreamCommit(topXid, lsnA, lsnB, ts1),
		protocol.MessageTypeStreamAbort:      pt.StreamAbort(topXid, topXid),
		protocol.MessageTypeBeginPrepare:     pt.BeginPrepare(lsnA, lsnB, ts1, topXid, gid),
		protocol.MessageTypePrepare:          pt.Prepare(lsnA, lsnB, ts1, topXid, gid),
		protocol.MessageTypeCommitPrepared:   pt.CommitPrepared(lsnA, lsnB, ts1, topXid, gid),
		protocol.MessageTypeRollbackPrepared: pt.RollbackPrepared(lsnA, lsnB, ts1, ts2, topXid, gid),
		protocol.MessageTypeStreamPrepare:    pt.StreamPrepare(lsnA, lsnB, ts1, topXid, gid),
	}
}

func TestDecoderProtocolVersion(t *testing.T) {
	since := map[protocol.MessageType]int{
		protocol.MessageTypeStreamStart: 2, protocol.MessageTypeStreamStop: 2,
		protocol.MessageTypeStreamCommit: 2, protocol.MessageTypeStreamAbort: 2,
		protocol.MessageTypeBeginPrepare: 3, protocol.MessageTypePrepare: 3,
		protocol.MessageTypeCommitPrepared: 3, protocol.MessageTypeRollbackPrepared: 3,
		protocol.MessageTypeStreamPrepare: 3,
	}
	for typ, src := range oneOfEach() {
		for v := 1; v <= 4; v++ {
			t.Run(fmt.Sprintf("%v proto %d", typ, v), func(t *testing.T) {
				d := newDecoder(t, v, false)
				if typ == protocol.MessageTypeStreamStop && v >= 2 {
					if _, err := d.Decode(pt.StreamStart(topXid, true)); err != nil {
						t.Fatal(err)
					}
				}
				m, err := d.Decode(src)
				if v < since[typ] {
					var de *protocol.DecodeError
					if !errors.Is(err, protocol.ErrUnsupportedByVersion) || !errors.As(err, &de) ||
						de.Message != typ || de.Field != "message type" || de.Offset != 0 {
						t.Fatalf("got %v, want ErrUnsupportedByVersion on the message type", err)
					}
					return
				}
				if err != nil || m.Type() != typ {
					t.Fatalf("got %v, %v", m, err)
				}
			})
		}
	}
}

func TestDecoderUnknownAndEmpty(t *testing.T) {
	d := newDecoder(t, 4, true)
	for _, src := range [][]byte{{'Z'}, {'w', 0, 0}, {0}, {'k'}, {0xff, 1, 2, 3}} {
		_, err := d.Decode(src)
		var de *protocol.DecodeError
		if !errors.Is(err, protocol.ErrUnknownMessageType) || !errors.As(err, &de) ||
			de.Message != protocol.MessageType(src[0]) || de.Field != "message type" {
			t.Errorf("Decode(% x): got %v, want ErrUnknownMessageType", src, err)
		}
		if _, err := d.DecodeStreamedChange(src); !errors.Is(err, protocol.ErrUnknownMessageType) {
			t.Errorf("DecodeStreamedChange(% x): got %v, want ErrUnknownMessageType", src, err)
		}
	}
	for _, src := range [][]byte{nil, {}} {
		if _, err := d.Decode(src); !errors.Is(err, protocol.ErrShortMessage) {
			t.Errorf("Decode(%#v): got %v, want ErrShortMessage", src, err)
		}
		if _, err := d.DecodeStreamedChange(src); !errors.Is(err, protocol.ErrShortMessage) {
			t.Errorf("DecodeStreamedChange(%#v): got %v, want ErrShortMessage", src, err)
		}
	}
}

func TestDecoderFraming(t *testing.T) {
	start := okIn(pt.StreamStart(topXid, true), topXid)
	inBlock := func(src []byte) []step {
		return []step{start, fails(src, protocol.ErrStreamFraming, true, topXid)}
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"stream stop outside a block", []step{fails(pt.StreamStop(), protocol.ErrStreamFraming, false, 0)}},
		{"stream stop twice", []step{start, {src: pt.StreamStop()}, fails(pt.StreamStop(), protocol.ErrStreamFraming, false, 0)}},
		{"stream start inside a block", inBlock(pt.StreamStart(topXid, false))},
		{"stream start of another xid inside a block", inBlock(pt.StreamStart(otherXid, true))},
		{"stream commit inside a block", inBlock(pt.StreamCommit(topXid, lsnA, lsnB, ts1))},
		{"stream abort inside a block", inBlock(pt.StreamAbort(topXid, subXid))},
		{"stream prepare inside a block", inBlock(pt.StreamPrepare(lsnA, lsnB, ts1, topXid, gid))},
		{"begin inside a block", inBlock(pt.Begin(lsnA, ts1, otherXid))},
		{"commit inside a block", inBlock(pt.Commit(lsnA, lsnB, ts1))},
		{"begin prepare inside a block", inBlock(pt.BeginPrepare(lsnA, lsnB, ts1, otherXid, gid))},
		{"prepare inside a block", inBlock(pt.Prepare(lsnA, lsnB, ts1, otherXid, gid))},
		{"commit prepared inside a block", inBlock(pt.CommitPrepared(lsnA, lsnB, ts1, otherXid, gid))},
		{"rollback prepared inside a block", inBlock(pt.RollbackPrepared(lsnA, lsnB, ts1, ts2, otherXid, gid))},
		{"non-transactional message inside a block", inBlock(pt.Message(topXid, false, lsnA, "p", nil))},
		// The block survives a rejected message: the caller decides
		// whether to go on.
		{"error keeps the block", append(inBlock(pt.Begin(lsnA, ts1, otherXid)),
			okIn(pt.Insert(rel, topXid, row1...), topXid), step{src: pt.StreamStop()})},
		// A malformed Stream Start does not open a block, a malformed
		// Stream Stop does not close one.
		{"bad stream start", []step{fails(pt.StreamStart(0, true), protocol.ErrInvalidXid, false, 0)}},
		{"bad stream stop", []step{start, fails([]byte{'E', 0}, protocol.ErrTrailingBytes, true, topXid)}},
		// A change without the xid inside a block is misread: here the
		// relation OID is taken for the xid and the rest is too short.
		{"unstreamed insert inside a block", []step{start, fails(pt.Insert(rel, 0), protocol.ErrShortMessage, true, topXid)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runTranscript(t, newDecoder(t, 4, false), tc.steps)
		})
	}
}

func TestDecoderReset(t *testing.T) {
	d := newDecoder(t, 2, false)
	runTranscript(t, d, []step{okIn(pt.StreamStart(topXid, true), topXid)})
	d.Reset()
	if d.InStream() || d.StreamXid() != 0 {
		t.Fatalf("after Reset: InStream %v, StreamXid %d", d.InStream(), d.StreamXid())
	}
	// A new connection starts outside a block: Stream Stop is an error
	// again and changes are not streamed.
	runTranscript(t, d, []step{
		fails(pt.StreamStop(), protocol.ErrStreamFraming, false, 0),
		ok(pt.Insert(rel, 0, row1...)),
	})
}

func TestDecoderReusesValues(t *testing.T) {
	d := newDecoder(t, 2, false)
	m1, err := d.Decode(pt.Insert(rel, 0, pt.Text("first"), pt.Null()))
	if err != nil {
		t.Fatal(err)
	}
	m2, err := d.Decode(pt.Insert(rel+1, 0, pt.Text("second")))
	if err != nil {
		t.Fatal(err)
	}
	if m1 != m2 {
		t.Fatal("Decode returned a new *Insert for the second Insert")
	}
	ins := m2.(*protocol.Insert)
	if ins.RelationID != rel+1 || len(ins.New.Columns) != 1 || string(ins.New.Columns[0].Data) != "second" {
		t.Fatalf("reused Insert holds %+v", ins)
	}
	// Relation and Type values are retained by callers: each decode
	// returns a new one.
	for _, pair := range [][2][]byte{
		{pt.Relation(rel, 0, "public", "a", protocol.ReplicaIdentityDefault, pt.Column("x", 23, true)),
			pt.Relation(rel+1, 0, "public", "b", protocol.ReplicaIdentityDefault, pt.Column("y", 25, false))},
		{pt.Type(16400, 0, "public", "a"), pt.Type(16401, 0, "public", "b")},
	} {
		first, err := d.Decode(pair[0])
		if err != nil {
			t.Fatal(err)
		}
		second, err := d.Decode(pair[1])
		if err != nil {
			t.Fatal(err)
		}
		if first == second {
			t.Fatalf("Decode returned the same %T twice", first)
		}
		if got := pt.Encode(first); string(got) != string(pair[0]) {
			t.Fatalf("an earlier %v changed: it now encodes to % x", first.Type(), got)
		}
	}
}

func TestDecodeStreamedChange(t *testing.T) {
	d := newDecoder(t, 4, false)
	// Outside a block: the spilled changes carry their xid.
	for _, src := range [][]byte{
		pt.Relation(rel, subXid, "public", "t", protocol.ReplicaIdentityDefault, relCols...),
		pt.Type(16400, subXid, "public", "mood"),
		pt.Insert(rel, subXid, row1...),
		pt.Update(rel, subXid, row1...),
		pt.Delete(rel, subXid, protocol.TupleOldKey, row1Key...),
		pt.Truncate(subXid, 0, rel),
		pt.Message(subXid, true, lsnA, "p", []byte("x")),
	} {
		m, err := d.DecodeStreamedChange(src)
		if err != nil {
			t.Fatalf("%c: %v", src[0], err)
		}
		if flag, _ := streamedOf(m); !flag {
			t.Errorf("%v: Streamed = false", m.Type())
		}
		if got := pt.Encode(m); string(got) != string(src) {
			t.Errorf("%v: re-encoded % x, want % x", m.Type(), got, src)
		}
	}
	if m, err := d.DecodeStreamedChange(pt.Origin(0, "o")); err != nil || m.(*protocol.Origin).Name != "o" {
		t.Errorf("Origin: %v, %v", m, err)
	}
	if d.InStream() {
		t.Fatal("DecodeStreamedChange opened a block")
	}
	// Inside a block it does not close or change it.
	runTranscript(t, d, []step{okIn(pt.StreamStart(topXid, true), topXid)})
	if _, err := d.DecodeStreamedChange(pt.Insert(rel, subXid, row1...)); err != nil {
		t.Fatal(err)
	}
	if !d.InStream() || d.StreamXid() != topXid {
		t.Fatal("DecodeStreamedChange changed the block")
	}
	// Only changes are accepted.
	for typ, src := range oneOfEach() {
		switch typ {
		case protocol.MessageTypeRelation, protocol.MessageTypeType, protocol.MessageTypeInsert,
			protocol.MessageTypeUpdate, protocol.MessageTypeDelete, protocol.MessageTypeTruncate,
			protocol.MessageTypeMessage, protocol.MessageTypeOrigin:
			continue
		}
		if _, err := d.DecodeStreamedChange(src); !errors.Is(err, protocol.ErrStreamFraming) {
			t.Errorf("%v: got %v, want ErrStreamFraming", typ, err)
		}
	}
	// A non-transactional message is never part of a streamed transaction.
	if _, err := d.DecodeStreamedChange(pt.Message(subXid, false, lsnA, "p", nil)); !errors.Is(err, protocol.ErrStreamFraming) {
		t.Errorf("non-transactional message: got %v, want ErrStreamFraming", err)
	}
	// Protocol 1 has no streaming.
	if _, err := newDecoder(t, 1, false).DecodeStreamedChange(pt.Insert(rel, subXid, row1...)); !errors.Is(err, protocol.ErrUnsupportedByVersion) {
		t.Errorf("proto 1: got %v, want ErrUnsupportedByVersion", err)
	}
}
