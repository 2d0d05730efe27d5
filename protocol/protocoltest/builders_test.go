package protocoltest_test

import (
	"reflect"
	"testing"

	"github.com/walapply/walapply/protocol"
	pt "github.com/walapply/walapply/protocol/protocoltest"
)

// TestBuilders decodes what each builder writes with a protocol 4 Decoder
// (streaming = parallel where the abort info matters) and compares it with
// the arguments. The byte layout itself is pinned by the golden tests in
// package protocol, which compare Encode with hand-written bytes.
func TestBuilders(t *testing.T) {
	const (
		lsn1 = protocol.LSN(0x1_0000_0010)
		lsn2 = protocol.LSN(0x1_0000_0080)
		ts   = protocol.Timestamp(767880000000000)
	)
	cols := []protocol.RelationColumn{pt.Column("id", 23, true), pt.Column("v", 25, false)}
	row := []pt.Col{pt.Text("1"), pt.Binary([]byte{1, 2}), pt.Null(), pt.Unchanged()}
	key := []pt.Col{pt.Text("1"), pt.Null(), pt.Null(), pt.Null()}
	tuple := func(c []pt.Col) protocol.TupleData { return protocol.TupleData{Columns: c} }

	for _, tc := range []struct {
		name     string
		inStream bool // decode inside a stream block
		parallel bool
		src      []byte
		want     protocol.Message
	}{
		{"Begin", false, false, pt.Begin(lsn1, ts, 7), &protocol.Begin{FinalLSN: lsn1, CommitTime: ts, Xid: 7}},
		{"Commit", false, false, pt.Commit(lsn1, lsn2, ts), &protocol.Commit{CommitLSN: lsn1, EndLSN: lsn2, CommitTime: ts}},
		{"Origin", false, false, pt.Origin(lsn1, "o"), &protocol.Origin{CommitLSN: lsn1, Name: "o"}},
		{"Relation", false, false, pt.Relation(10, 0, "s", "t", protocol.ReplicaIdentityFull, cols...),
			&protocol.Relation{RelationID: 10, Namespace: "s", Name: "t", ReplicaIdentity: 'f', Columns: cols}},
		{"Relation streamed", true, false, pt.Relation(10, 8, "s", "t", protocol.ReplicaIdentityDefault, cols...),
			&protocol.Relation{Streamed: true, Xid: 8, RelationID: 10, Namespace: "s", Name: "t", ReplicaIdentity: 'd', Columns: cols}},
		{"Type", false, false, pt.Type(20000, 0, "s", "ty"), &protocol.TypeMessage{TypeOID: 20000, Namespace: "s", Name: "ty"}},
		{"Type streamed", true, false, pt.Type(20000, 8, "s", "ty"), &protocol.TypeMessage{Streamed: true, Xid: 8, TypeOID: 20000, Namespace: "s", Name: "ty"}},
		{"Insert", false, false, pt.Insert(10, 0, row...), &protocol.Insert{RelationID: 10, New: tuple(row)}},
		{"Insert streamed", true, false, pt.Insert(10, 8, row...), &protocol.Insert{Streamed: true, Xid: 8, RelationID: 10, New: tuple(row)}},
		{"Update", false, false, pt.Update(10, 0, row...), &protocol.Update{RelationID: 10, New: tuple(row)}},
		{"UpdateOld K", false, false, pt.UpdateOld(10, 0, protocol.TupleOldKey, key, row),
			&protocol.Update{RelationID: 10, OldKind: 'K', Old: tuple(key), New: tuple(row)}},
		{"UpdateOld O streamed", true, false, pt.UpdateOld(10, 8, protocol.TupleOld, row, row),
			&protocol.Update{Streamed: true, Xid: 8, RelationID: 10, OldKind: 'O', Old: tuple(row), New: tuple(row)}},
		{"Delete", false, false, pt.Delete(10, 0, protocol.TupleOldKey, key...), &protocol.Delete{RelationID: 10, OldKind: 'K', Old: tuple(key)}},
		{"Delete streamed", true, false, pt.Delete(10, 8, protocol.TupleOld, row...), &protocol.Delete{Streamed: true, Xid: 8, RelationID: 10, OldKind: 'O', Old: tuple(row)}},
		{"Truncate", false, false, pt.Truncate(0, protocol.TruncateCascade, 10, 11), &protocol.Truncate{Options: 1, RelationIDs: []uint32{10, 11}}},
		{"Truncate streamed", true, false, pt.Truncate(8, 0, 10), &protocol.Truncate{Streamed: true, Xid: 8, RelationIDs: []uint32{10}}},
		{"Message", false, false, pt.Message(0, false, lsn1, "p", []byte("c")), &protocol.LogicalMessage{LSN: lsn1, Prefix: "p", Content: []byte("c")}},
		{"Message streamed", true, false, pt.Message(8, true, lsn1, "p", []byte("c")),
			&protocol.LogicalMessage{Streamed: true, Xid: 8, Flags: 1, LSN: lsn1, Prefix: "p", Content: []byte("c")}},
		{"StreamCommit", false, false, pt.StreamCommit(8, lsn1, lsn2, ts), &protocol.StreamCommit{Xid: 8, CommitLSN: lsn1, EndLSN: lsn2, CommitTime: ts}},
		{"StreamAbort", false, false, pt.StreamAbort(8, 9), &protocol.StreamAbort{Xid: 8, SubXid: 9}},
		{"StreamAbortParallel", false, true, pt.StreamAbortParallel(8, 9, lsn1, ts),
			&protocol.StreamAbort{WithAbortInfo: true, Xid: 8, SubXid: 9, AbortLSN: lsn1, AbortTime: ts}},
		{"BeginPrepare", false, false, pt.BeginPrepare(lsn1, lsn2, ts, 8, "g"), &protocol.BeginPrepare{PrepareLSN: lsn1, EndLSN: lsn2, PrepareTime: ts, Xid: 8, GID: "g"}},
		{"Prepare", false, false, pt.Prepare(lsn1, lsn2, ts, 8, "g"), &protocol.Prepare{PrepareLSN: lsn1, EndLSN: lsn2, PrepareTime: ts, Xid: 8, GID: "g"}},
		{"StreamPrepare", false, false, pt.StreamPrepare(lsn1, lsn2, ts, 8, "g"), &protocol.StreamPrepare{PrepareLSN: lsn1, EndLSN: lsn2, PrepareTime: ts, Xid: 8, GID: "g"}},
		{"CommitPrepared", false, false, pt.CommitPrepared(lsn1, lsn2, ts, 8, "g"), &protocol.CommitPrepared{CommitLSN: lsn1, EndLSN: lsn2, CommitTime: ts, Xid: 8, GID: "g"}},
		{"RollbackPrepared", false, false, pt.RollbackPrepared(lsn1, lsn2, ts, ts+1, 8, "g"),
			&protocol.RollbackPrepared{PrepareEndLSN: lsn1, RollbackEndLSN: lsn2, PrepareTime: ts, RollbackTime: ts + 1, Xid: 8, GID: "g"}},
		{"StreamStart", false, false, pt.StreamStart(8, true), &protocol.StreamStart{Xid: 8, FirstSegment: true}},
		{"StreamStop", true, false, pt.StreamStop(), &protocol.StreamStop{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := protocol.NewDecoder(protocol.DecoderOptions{ProtoVersion: 4, StreamingParallel: tc.parallel})
			if err != nil {
				t.Fatal(err)
			}
			if tc.inStream {
				if _, err := d.Decode(pt.StreamStart(8, true)); err != nil {
					t.Fatal(err)
				}
			}
			got, err := d.Decode(tc.src)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %#v\nwant %#v", got, tc.want)
			}
		})
	}
}

func TestEncodeUnknownTypePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Encode of a foreign Message type did not panic")
		}
	}()
	pt.Encode(foreign{})
}

type foreign struct{}

func (foreign) Type() protocol.MessageType { return 'Z' }
func (foreign) Decode([]byte) error        { return nil }
