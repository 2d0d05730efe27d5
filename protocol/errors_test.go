package protocol_test

import (
	"errors"
	"testing"

	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/protocol/protocoltest"
)

// patch returns a copy of b with the bytes at off replaced by v.
func patch(b []byte, off int, v ...byte) []byte {
	c := append([]byte(nil), b...)
	copy(c[off:], v)
	return c
}

// cut returns b without its last n bytes.
func cut(b []byte, n int) []byte { return b[:len(b)-n] }

type errorCase struct {
	name   string
	dst    protocol.Message // a blank value; Streamed / WithAbortInfo set as input
	src    []byte
	want   error
	field  string
	offset int
}

func runErrorCases(t *testing.T, cases []errorCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.dst.Decode(tc.src)
			if err == nil {
				t.Fatalf("Decode(% x) succeeded, want %v", tc.src, tc.want)
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("error %q does not wrap %q", err, tc.want)
			}
			var de *protocol.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %T is not a *DecodeError", err)
			}
			if de.Message != tc.dst.Type() || de.Field != tc.field || de.Offset != tc.offset {
				t.Errorf("DecodeError{Message: %v, Field: %q, Offset: %d}, want {%v, %q, %d}\n(%v)",
					de.Message, de.Field, de.Offset, tc.dst.Type(), tc.field, tc.offset, err)
			}
		})
	}
}

var (
	okBegin   = protocoltest.Begin(lsnA, ts1, 741)
	okCommit  = protocoltest.Commit(lsnA, lsnB, ts1)
	okInsert  = protocoltest.Insert(16384, 0, protocoltest.Text("ab"), protocoltest.Null())
	okSInsert = protocoltest.Insert(16384, 742, protocoltest.Text("ab"))
	// okRelation: rel 1-4, namespace "s" 5-6, name "t" 7-8, identity 9,
	// column count 10-11, column 0: flags 12, name "a" 13-14, type OID
	// 15-18, typmod 19-22.
	okRelation         = protocoltest.Relation(16384, 0, "s", "t", protocol.ReplicaIdentityDefault, protocoltest.Column("a", 23, true))
	longColumnRelation = protocoltest.Relation(16384, 0, "s", "t", protocol.ReplicaIdentityDefault, protocoltest.Column("abcdefghijkl", 23, true))
	okTruncate         = protocoltest.Truncate(0, 0, 16384)
	// okMessage: flags 1, LSN 2-9, prefix "p" 10-11, length 12-15, content 16-17.
	okMessage = protocoltest.Message(0, true, lsnA, "p", []byte("hi"))
	okPrepare = protocoltest.Prepare(lsnA, lsnB, ts1, 741, "g")
)

func TestDecodeErrorShortAndTrailing(t *testing.T) {
	runErrorCases(t, []errorCase{
		{"empty", &protocol.Begin{}, nil, protocol.ErrShortMessage, "message type", 0},
		{"begin without xid", &protocol.Begin{}, cut(okBegin, 4), protocol.ErrShortMessage, "xid", 17},
		{"begin, extra byte", &protocol.Begin{}, append(okBegin[:21:21], 0), protocol.ErrTrailingBytes, "", 21},
		{"commit, extra bytes", &protocol.Commit{}, append(okCommit[:26:26], 1, 2), protocol.ErrTrailingBytes, "", 26},
		{"origin name without NUL", &protocol.Origin{}, cut(protocoltest.Origin(lsnA, "x"), 1), protocol.ErrShortMessage, "name", 9},
		{"tuple value past the end", &protocol.Insert{}, cut(protocoltest.Insert(1, 0, protocoltest.Text("ab")), 1), protocol.ErrShortMessage, "new tuple column 0 value", 13},
		{"tuple length past the end", &protocol.Insert{}, cut(protocoltest.Insert(1, 0, protocoltest.Text("")), 1), protocol.ErrShortMessage, "new tuple column 0 length", 9},
		{"tuple column count past the end", &protocol.Insert{}, patch(okInsert, 6, 0x7f, 0xff), protocol.ErrShortMessage, "new tuple column count", 6},
		{"tuple kind missing", &protocol.Insert{}, patch(okInsert, 6, 0x00, 0x03), protocol.ErrShortMessage, "new tuple column 2 kind", len(okInsert)},
		{"streamed insert without xid", &protocol.Insert{Streamed: true}, okInsert[:3], protocol.ErrShortMessage, "xid", 1},
		{"relation column count past the end", &protocol.Relation{}, patch(okRelation, 10, 0x00, 0x02), protocol.ErrShortMessage, "column count", 10},
		{"relation column name without NUL", &protocol.Relation{}, longColumnRelation[:23], protocol.ErrShortMessage, "column 0 name", 13},
		{"truncate count past the end", &protocol.Truncate{}, patch(okTruncate, 1, 0x00, 0x00, 0x00, 0x02), protocol.ErrShortMessage, "relation count", 1},
		{"message content past the end", &protocol.LogicalMessage{}, cut(okMessage, 1), protocol.ErrShortMessage, "content", 16},
		{"stream stop, extra byte", &protocol.StreamStop{}, []byte{'E', 0}, protocol.ErrTrailingBytes, "", 1},
		{"stream abort 25 bytes without abort info", &protocol.StreamAbort{}, protocoltest.StreamAbortParallel(741, 741, lsnA, ts1), protocol.ErrTrailingBytes, "", 9},
		{"stream abort 9 bytes with abort info", &protocol.StreamAbort{WithAbortInfo: true}, protocoltest.StreamAbort(741, 741), protocol.ErrShortMessage, "abort LSN", 9},
		{"prepare GID without NUL", &protocol.Prepare{}, cut(okPrepare, 1), protocol.ErrShortMessage, "gid", 30},
	})
}

func TestDecodeErrorTypeByte(t *testing.T) {
	runErrorCases(t, []errorCase{
		{"commit given to begin", &protocol.Begin{}, okCommit, protocol.ErrWrongMessageType, "message type", 0},
		{"stream prepare given to prepare", &protocol.Prepare{}, protocoltest.StreamPrepare(lsnA, lsnB, ts1, 741, "g"), protocol.ErrWrongMessageType, "message type", 0},
		{"unknown byte given to insert", &protocol.Insert{}, patch(okInsert, 0, 'Z'), protocol.ErrWrongMessageType, "message type", 0},
	})
}

func TestDecodeErrorTupleKind(t *testing.T) {
	bad := protocoltest.Insert(1, 0, protocoltest.Text("ab"), protocoltest.Col{Kind: 'x'})
	oldBad := protocoltest.UpdateOld(1, 0, protocol.TupleOldKey, []protocoltest.Col{{Kind: 0}}, nil)
	runErrorCases(t, []errorCase{
		{"insert kind x", &protocol.Insert{}, bad, protocol.ErrUnknownTupleKind, "new tuple column 1 kind", 15},
		{"update old kind 0", &protocol.Update{}, oldBad, protocol.ErrUnknownTupleKind, "old tuple column 0 kind", 8},
		{"delete kind N", &protocol.Delete{}, protocoltest.Delete(1, 0, protocol.TupleOld, protocoltest.Col{Kind: 'N'}), protocol.ErrUnknownTupleKind, "old tuple column 0 kind", 8},
	})
}

func TestDecodeErrorFlags(t *testing.T) {
	runErrorCases(t, []errorCase{
		{"commit", &protocol.Commit{}, patch(okCommit, 1, 1), protocol.ErrNonzeroFlags, "flags", 1},
		{"stream commit", &protocol.StreamCommit{}, patch(protocoltest.StreamCommit(741, lsnA, lsnB, ts1), 5, 0x80), protocol.ErrNonzeroFlags, "flags", 5},
		{"prepare", &protocol.Prepare{}, patch(okPrepare, 1, 1), protocol.ErrNonzeroFlags, "flags", 1},
		{"stream prepare", &protocol.StreamPrepare{}, patch(protocoltest.StreamPrepare(lsnA, lsnB, ts1, 741, "g"), 1, 2), protocol.ErrNonzeroFlags, "flags", 1},
		{"commit prepared", &protocol.CommitPrepared{}, patch(protocoltest.CommitPrepared(lsnA, lsnB, ts1, 741, "g"), 1, 1), protocol.ErrNonzeroFlags, "flags", 1},
		{"rollback prepared", &protocol.RollbackPrepared{}, patch(protocoltest.RollbackPrepared(lsnA, lsnB, ts1, ts2, 741, "g"), 1, 1), protocol.ErrNonzeroFlags, "flags", 1},
		{"message flags 2", &protocol.LogicalMessage{}, patch(okMessage, 1, 2), protocol.ErrNonzeroFlags, "flags", 1},
		{"message flags 3", &protocol.LogicalMessage{}, patch(okMessage, 1, 3), protocol.ErrNonzeroFlags, "flags", 1},
		{"truncate unknown option", &protocol.Truncate{}, patch(okTruncate, 5, 4), protocol.ErrNonzeroFlags, "options", 5},
		{"relation column flag 2", &protocol.Relation{}, patch(okRelation, 12, 3), protocol.ErrNonzeroFlags, "column 0 flags", 12},
	})
}

func TestDecodeErrorLSN(t *testing.T) {
	zero := make([]byte, 8)
	runErrorCases(t, []errorCase{
		{"begin final", &protocol.Begin{}, patch(okBegin, 1, zero...), protocol.ErrInvalidLSN, "final LSN", 1},
		{"commit commit", &protocol.Commit{}, patch(okCommit, 2, zero...), protocol.ErrInvalidLSN, "commit LSN", 2},
		{"commit end", &protocol.Commit{}, patch(okCommit, 10, zero...), protocol.ErrInvalidLSN, "end LSN", 10},
		{"stream commit end", &protocol.StreamCommit{}, protocoltest.StreamCommit(741, lsnA, 0, ts1), protocol.ErrInvalidLSN, "end LSN", 14},
		{"begin prepare prepare", &protocol.BeginPrepare{}, protocoltest.BeginPrepare(0, lsnB, ts1, 741, "g"), protocol.ErrInvalidLSN, "prepare LSN", 1},
		{"begin prepare end", &protocol.BeginPrepare{}, protocoltest.BeginPrepare(lsnA, 0, ts1, 741, "g"), protocol.ErrInvalidLSN, "end LSN", 9},
		{"prepare prepare", &protocol.Prepare{}, protocoltest.Prepare(0, lsnB, ts1, 741, "g"), protocol.ErrInvalidLSN, "prepare LSN", 2},
		{"prepare end", &protocol.Prepare{}, protocoltest.Prepare(lsnA, 0, ts1, 741, "g"), protocol.ErrInvalidLSN, "end LSN", 10},
		{"stream prepare end", &protocol.StreamPrepare{}, protocoltest.StreamPrepare(lsnA, 0, ts1, 741, "g"), protocol.ErrInvalidLSN, "end LSN", 10},
		{"commit prepared commit", &protocol.CommitPrepared{}, protocoltest.CommitPrepared(0, lsnB, ts1, 741, "g"), protocol.ErrInvalidLSN, "commit LSN", 2},
		{"commit prepared end", &protocol.CommitPrepared{}, protocoltest.CommitPrepared(lsnA, 0, ts1, 741, "g"), protocol.ErrInvalidLSN, "end LSN", 10},
		{"rollback prepared prepare end", &protocol.RollbackPrepared{}, protocoltest.RollbackPrepared(0, lsnB, ts1, ts2, 741, "g"), protocol.ErrInvalidLSN, "prepare end LSN", 2},
		{"rollback prepared rollback end", &protocol.RollbackPrepared{}, protocoltest.RollbackPrepared(lsnA, 0, ts1, ts2, 741, "g"), protocol.ErrInvalidLSN, "rollback end LSN", 10},
	})
}

func TestDecodeErrorXid(t *testing.T) {
	runErrorCases(t, []errorCase{
		{"prepare", &protocol.Prepare{}, protocoltest.Prepare(lsnA, lsnB, ts1, 0, "g"), protocol.ErrInvalidXid, "xid", 26},
		{"stream prepare", &protocol.StreamPrepare{}, protocoltest.StreamPrepare(lsnA, lsnB, ts1, 0, "g"), protocol.ErrInvalidXid, "xid", 26},
		{"begin", &protocol.Begin{}, protocoltest.Begin(lsnA, ts1, 0), protocol.ErrInvalidXid, "xid", 17},
		{"begin prepare", &protocol.BeginPrepare{}, protocoltest.BeginPrepare(lsnA, lsnB, ts1, 0, "g"), protocol.ErrInvalidXid, "xid", 25},
		{"commit prepared", &protocol.CommitPrepared{}, protocoltest.CommitPrepared(lsnA, lsnB, ts1, 0, "g"), protocol.ErrInvalidXid, "xid", 26},
		{"rollback prepared", &protocol.RollbackPrepared{}, protocoltest.RollbackPrepared(lsnA, lsnB, ts1, ts2, 0, "g"), protocol.ErrInvalidXid, "xid", 34},
		{"stream start", &protocol.StreamStart{}, protocoltest.StreamStart(0, true), protocol.ErrInvalidXid, "xid", 1},
		{"stream commit", &protocol.StreamCommit{}, protocoltest.StreamCommit(0, lsnA, lsnB, ts1), protocol.ErrInvalidXid, "xid", 1},
		{"stream abort subxid", &protocol.StreamAbort{}, protocoltest.StreamAbort(741, 0), protocol.ErrInvalidXid, "subtransaction xid", 5},
		{"streamed insert", &protocol.Insert{Streamed: true}, patch(okSInsert, 1, 0, 0, 0, 0), protocol.ErrInvalidXid, "xid", 1},
	})
}

func TestDecodeErrorMarker(t *testing.T) {
	upd := protocoltest.UpdateOld(1, 0, protocol.TupleOldKey, []protocoltest.Col{protocoltest.Null()}, []protocoltest.Col{protocoltest.Null()})
	runErrorCases(t, []errorCase{
		{"insert K", &protocol.Insert{}, patch(okInsert, 5, 'K'), protocol.ErrBadMarker, "new tuple marker", 5},
		{"update X", &protocol.Update{}, patch(upd, 5, 'X'), protocol.ErrBadMarker, "tuple marker", 5},
		{"update N only, then K", &protocol.Update{}, patch(upd, 5, 'N', 0, 1, 'n', 'K'), protocol.ErrTrailingBytes, "", 9},
		{"update K then O", &protocol.Update{}, patch(upd, 9, 'O'), protocol.ErrBadMarker, "new tuple marker", 9},
		{"update K then K", &protocol.Update{}, patch(upd, 9, 'K'), protocol.ErrBadMarker, "new tuple marker", 9},
		{"delete N", &protocol.Delete{}, protocoltest.Delete(1, 0, protocol.TupleNew, protocoltest.Null()), protocol.ErrBadMarker, "old tuple marker", 5},
		{"delete lowercase k", &protocol.Delete{}, protocoltest.Delete(1, 0, 'k', protocoltest.Null()), protocol.ErrBadMarker, "old tuple marker", 5},
	})
}

func TestDecodeErrorLength(t *testing.T) {
	runErrorCases(t, []errorCase{
		{"tuple length -1", &protocol.Insert{}, patch(okInsert, 9, 0xff, 0xff, 0xff, 0xff), protocol.ErrBadLength, "new tuple column 0 length", 9},
		{"tuple length min int32", &protocol.Insert{}, patch(okInsert, 9, 0x80, 0, 0, 0), protocol.ErrBadLength, "new tuple column 0 length", 9},
		{"tuple column count -1", &protocol.Insert{}, patch(okInsert, 6, 0xff, 0xff), protocol.ErrBadLength, "new tuple column count", 6},
		{"relation column count -1", &protocol.Relation{}, patch(okRelation, 10, 0xff, 0xff), protocol.ErrBadLength, "column count", 10},
		{"truncate count -1", &protocol.Truncate{}, patch(okTruncate, 1, 0xff, 0xff, 0xff, 0xff), protocol.ErrBadLength, "relation count", 1},
		{"truncate count 0", &protocol.Truncate{}, protocoltest.Truncate(0, 0), protocol.ErrBadLength, "relation count", 1},
		{"message content length -1", &protocol.LogicalMessage{}, patch(okMessage, 12, 0xff, 0xff, 0xff, 0xff), protocol.ErrBadLength, "content length", 12},
	})
}

func TestDecodeErrorValue(t *testing.T) {
	runErrorCases(t, []errorCase{
		{"replica identity x", &protocol.Relation{}, patch(okRelation, 9, 'x'), protocol.ErrInvalidValue, "replica identity", 9},
		{"replica identity D", &protocol.Relation{}, patch(okRelation, 9, 'D'), protocol.ErrInvalidValue, "replica identity", 9},
		{"relation OID 0", &protocol.Relation{}, patch(okRelation, 1, 0, 0, 0, 0), protocol.ErrInvalidValue, "relation OID", 1},
		{"column type OID 0", &protocol.Relation{}, patch(okRelation, 15, 0, 0, 0, 0), protocol.ErrInvalidValue, "column 0 type OID", 15},
		{"type OID 0", &protocol.TypeMessage{}, protocoltest.Type(0, 0, "s", "t"), protocol.ErrInvalidValue, "type OID", 1},
		{"insert relation OID 0", &protocol.Insert{}, patch(okInsert, 1, 0, 0, 0, 0), protocol.ErrInvalidValue, "relation OID", 1},
		{"streamed insert relation OID 0", &protocol.Insert{Streamed: true}, patch(okSInsert, 5, 0, 0, 0, 0), protocol.ErrInvalidValue, "relation OID", 5},
		{"truncate relation OID 0", &protocol.Truncate{}, protocoltest.Truncate(0, 0, 16384, 0), protocol.ErrInvalidValue, "relation OID", 10},
		{"stream start first segment 2", &protocol.StreamStart{}, patch(protocoltest.StreamStart(741, true), 5, 2), protocol.ErrInvalidValue, "first segment", 5},
	})
}

func TestDecodeErrorText(t *testing.T) {
	src := protocoltest.Insert(16384, 0, protocoltest.Null(), protocoltest.Null(), protocoltest.Null(), protocoltest.Text("x"))
	err := new(protocol.Insert).Decode(src[:13]) // kind of column 3 at 11, its length at 12
	const want = `protocol: decoding Insert: field "new tuple column 3 length" at offset 12: message too short`
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
	err = new(protocol.Begin).Decode(okCommit)
	const wantType = `protocol: decoding Begin: field "message type" at offset 0: wrong message type: got Commit`
	if err == nil || err.Error() != wantType {
		t.Errorf("got %v\nwant %s", err, wantType)
	}
	err = new(protocol.Commit).Decode(append(okCommit[:26:26], 9))
	const wantTrailing = `protocol: decoding Commit at offset 26: trailing bytes after message: 1 extra`
	if err == nil || err.Error() != wantTrailing {
		t.Errorf("got %v\nwant %s", err, wantTrailing)
	}
	err = new(protocol.Insert).Decode(protocoltest.Insert(1, 0, protocoltest.Col{Kind: 0x01}))
	const wantKind = `protocol: decoding Insert: field "new tuple column 0 kind" at offset 8: unknown tuple column kind 0x01`
	if err == nil || err.Error() != wantKind {
		t.Errorf("got %v\nwant %s", err, wantKind)
	}
}
