package protocol_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/walapply/walapply/protocol"
	pt "github.com/walapply/walapply/protocol/protocoltest"
)

// FuzzDecoder input: the protocol version (mod 4, plus 1), whether streaming
// = parallel was asked for, and a transcript. The transcript is a sequence of
// frames: one byte L, then L&0x7f bytes of message; with L&0x80 set the
// message goes to DecodeStreamedChange instead of Decode.
const spilledFrame = 0x80

// frame appends one transcript frame for msg.
func frame(dst []byte, spilled bool, msg []byte) []byte {
	if len(msg) > 0x7f {
		panic(fmt.Sprintf("frame: %d-byte message is too long for a fuzz frame", len(msg)))
	}
	l := byte(len(msg))
	if spilled {
		l |= spilledFrame
	}
	return append(append(dst, l), msg...)
}

// frames builds a transcript of Decode frames.
func frames(msgs ...[]byte) []byte {
	var b []byte
	for _, m := range msgs {
		b = frame(b, false, m)
	}
	return b
}

type decoderSeed struct {
	name     string
	version  byte
	parallel bool
	data     []byte
}

func decoderSeeds() []decoderSeed {
	var seeds []decoderSeed
	all := [][]goldenCase{
		goldenBegin, goldenCommit, goldenOrigin, goldenRelation, goldenType, goldenInsert,
		goldenUpdate, goldenDelete, goldenTruncate, goldenLogicalMessage, goldenStreamStart,
		goldenStreamStop, goldenStreamCommit, goldenStreamAbort, goldenBeginPrepare, goldenPrepare,
		goldenStreamPrepare, goldenCommitPrepared, goldenRollbackPrepared,
	}
	for _, cases := range all {
		for _, gc := range cases {
			s := decoderSeed{name: gc.want.Type().String() + " " + gc.name, version: 3}
			streamed, _ := streamedOf(gc.want)
			switch w := gc.want.(type) {
			case *protocol.StreamAbort:
				if w.WithAbortInfo {
					s.version, s.parallel = 3, true // version byte 3 is protocol 4
				}
			case *protocol.StreamStop:
				streamed = true
			}
			if streamed {
				s.data = frames(pt.StreamStart(741, true), gc.src)
				if gc.want.Type() != protocol.MessageTypeStreamStop {
					s.data = frame(s.data, false, pt.StreamStop())
				}
				if _, change := streamedOf(gc.want); change {
					// and the same change replayed from a spill file
					s.data = frame(s.data, true, gc.src)
				}
			} else {
				s.data = frames(gc.src)
			}
			seeds = append(seeds, s)
		}
	}
	// A whole session: an ordinary transaction, a streamed one in two
	// blocks around another transaction, a two-phase one.
	seeds = append(seeds, decoderSeed{name: "session", version: 3, parallel: true, data: frames(
		pt.Begin(lsnA, ts1, topXid),
		pt.Relation(rel, 0, "public", "t", protocol.ReplicaIdentityDefault, relCols...),
		pt.Insert(rel, 0, row1...),
		pt.Commit(lsnA, lsnB, ts1),
		pt.StreamStart(otherXid, true),
		pt.Origin(0, "o"),
		pt.Insert(rel, otherXid, row1...),
		pt.StreamStop(),
		pt.Begin(lsnC, ts1, topXid+1),
		pt.Delete(rel, 0, protocol.TupleOldKey, row1Key...),
		pt.Commit(lsnC, lsnD, ts1),
		pt.StreamStart(otherXid, false),
		pt.UpdateOld(rel, otherXid+1, protocol.TupleOldKey, row1Key, row1),
		pt.StreamStop(),
		pt.StreamAbortParallel(otherXid, otherXid+1, lsnD, ts2),
		pt.StreamPrepare(lsnA, lsnB, ts1, otherXid, gid),
		pt.CommitPrepared(lsnC, lsnD, ts2, otherXid, gid),
	)})
	return seeds
}

func FuzzDecoder(f *testing.F) {
	for _, s := range decoderSeeds() {
		f.Add(s.version, s.parallel, s.data)
	}
	f.Fuzz(func(t *testing.T, version byte, parallel bool, data []byte) {
		v := int(version%4) + 1
		d, err := protocol.NewDecoder(protocol.DecoderOptions{ProtoVersion: v, StreamingParallel: parallel})
		if parallel && v < 4 {
			if err == nil {
				t.Fatalf("NewDecoder accepted streaming parallel with protocol %d", v)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		for len(data) > 0 {
			l := data[0]
			n := min(int(l&^spilledFrame), len(data)-1)
			msg := data[1 : 1+n]
			data = data[1+n:]
			checkDecoderStep(t, d, l&spilledFrame != 0, msg)
		}
	})
}

// checkDecoderStep decodes one message and checks the Decoder's contract:
// errors are well formed and change no state; a decoded message consumed
// exactly msg, exists in the protocol version, and moved the block state
// exactly as its type says.
func checkDecoderStep(t *testing.T, d *protocol.Decoder, spilled bool, msg []byte) {
	t.Helper()
	inStream, xid := d.InStream(), d.StreamXid()
	var m protocol.Message
	var err error
	if spilled {
		m, err = d.DecodeStreamedChange(msg)
	} else {
		m, err = d.Decode(msg)
	}
	if err != nil {
		if m != nil {
			t.Fatalf("error %v came with a message", err)
		}
		checkError(t, err, 0, len(msg))
		if d.InStream() != inStream || d.StreamXid() != xid {
			t.Fatalf("failed decode changed the block state: %v", err)
		}
		return
	}
	typ := m.Type()
	if typ != protocol.MessageType(msg[0]) {
		t.Fatalf("decoded %v from type byte %q", typ, msg[0])
	}
	if enc := pt.Encode(m); !bytes.Equal(enc, msg) {
		t.Fatalf("decoded %#v\nre-encodes to % x\n        from % x", m, enc, msg)
	}
	v := d.Options().ProtoVersion
	switch typ {
	case protocol.MessageTypeStreamStart, protocol.MessageTypeStreamStop, protocol.MessageTypeStreamCommit, protocol.MessageTypeStreamAbort:
		if v < 2 {
			t.Fatalf("%v accepted with protocol %d", typ, v)
		}
	case protocol.MessageTypeBeginPrepare, protocol.MessageTypePrepare, protocol.MessageTypeCommitPrepared,
		protocol.MessageTypeRollbackPrepared, protocol.MessageTypeStreamPrepare:
		if v < 3 {
			t.Fatalf("%v accepted with protocol %d", typ, v)
		}
	}
	if sa, ok := m.(*protocol.StreamAbort); ok && sa.WithAbortInfo != d.Options().StreamingParallel {
		t.Fatalf("StreamAbort.WithAbortInfo = %v with StreamingParallel %v", sa.WithAbortInfo, d.Options().StreamingParallel)
	}
	switch {
	case spilled:
		if flag, has := streamedOf(m); has && !flag {
			t.Fatalf("spilled %v decoded as not streamed", typ)
		}
		if d.InStream() != inStream || d.StreamXid() != xid {
			t.Fatal("DecodeStreamedChange changed the block state")
		}
	case typ == protocol.MessageTypeStreamStart:
		if inStream || !d.InStream() || d.StreamXid() != m.(*protocol.StreamStart).Xid {
			t.Fatalf("Stream Start: block state %v/%d -> %v/%d", inStream, xid, d.InStream(), d.StreamXid())
		}
	case typ == protocol.MessageTypeStreamStop:
		if !inStream || d.InStream() || d.StreamXid() != 0 {
			t.Fatalf("Stream Stop: block state %v/%d -> %v/%d", inStream, xid, d.InStream(), d.StreamXid())
		}
	default:
		if d.InStream() != inStream || d.StreamXid() != xid {
			t.Fatalf("%v changed the block state", typ)
		}
		if flag, has := streamedOf(m); has && flag != inStream {
			t.Fatalf("%v: Streamed = %v inside block = %v", typ, flag, inStream)
		}
		if inStream {
			switch typ {
			case protocol.MessageTypeBegin, protocol.MessageTypeCommit, protocol.MessageTypeStreamCommit,
				protocol.MessageTypeStreamAbort, protocol.MessageTypeStreamPrepare, protocol.MessageTypeBeginPrepare,
				protocol.MessageTypePrepare, protocol.MessageTypeCommitPrepared, protocol.MessageTypeRollbackPrepared:
				t.Fatalf("%v accepted inside a stream block", typ)
			}
		}
	}
}
