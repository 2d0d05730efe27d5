package protocol_test

import (
	"testing"

	"github.com/walapply/walapply/protocol"
)

var goldenStreamStart = []goldenCase{{
	name: "first segment",
	src: bs(
		'S',                            // message type
		[]byte{0x00, 0x00, 0x02, 0xe5}, // xid 741
		'\x01',                         // first segment: yes
	),
	want: &protocol.StreamStart{Xid: 741, FirstSegment: true},
}, {
	name: "later segment",
	src: bs(
		'S',                            // message type
		[]byte{0x00, 0x00, 0x02, 0xe5}, // xid 741
		'\x00',                         // first segment: no
	),
	want: &protocol.StreamStart{Xid: 741},
}}

func TestGoldenStreamStart(t *testing.T) {
	runGolden(t, goldenStreamStart)
}

var goldenStreamStop = []goldenCase{{
	name: "stop",
	src: bs(
		'E', // message type; nothing follows
	),
	want: &protocol.StreamStop{},
}}

func TestGoldenStreamStop(t *testing.T) {
	runGolden(t, goldenStreamStop)
}

var goldenStreamCommit = []goldenCase{{
	name: "commit",
	src: bs(
		'c',                            // message type
		[]byte{0x00, 0x00, 0x02, 0xe5}, // xid 741
		'\x00',                         // flags
		[]byte{0x00, 0x00, 0x00, 0x01, 0x6b, 0x37, 0x4d, 0x48}, // commit LSN 1/6B374D48
		[]byte{0x00, 0x00, 0x00, 0x01, 0x6b, 0x37, 0x4d, 0x78}, // end LSN 1/6B374D78
		[]byte{0x00, 0x02, 0xba, 0x61, 0xfe, 0xa1, 0x50, 0x00}, // commit time
	),
	want: &protocol.StreamCommit{Xid: 741, CommitLSN: lsnA, EndLSN: lsnB, CommitTime: ts1},
}}

func TestGoldenStreamCommit(t *testing.T) {
	runGolden(t, goldenStreamCommit)
}

var goldenStreamAbort = []goldenCase{{
	name: "9 bytes, top-level",
	src: bs(
		'A',                            // message type
		[]byte{0x00, 0x00, 0x02, 0xe5}, // xid 741
		[]byte{0x00, 0x00, 0x02, 0xe5}, // subtransaction xid 741: the whole transaction
	),
	want: &protocol.StreamAbort{Xid: 741, SubXid: 741},
}, {
	name: "9 bytes, subtransaction",
	src: bs(
		'A',                            // message type
		[]byte{0x00, 0x00, 0x02, 0xe5}, // xid 741
		[]byte{0x00, 0x00, 0x02, 0xe6}, // subtransaction xid 742
	),
	want: &protocol.StreamAbort{Xid: 741, SubXid: 742},
}, {
	name: "25 bytes, streaming parallel",
	src: bs(
		'A',                            // message type
		[]byte{0x00, 0x00, 0x02, 0xe5}, // xid 741
		[]byte{0x00, 0x00, 0x02, 0xe6}, // subtransaction xid 742
		[]byte{0x00, 0x00, 0x00, 0x01, 0x6b, 0x37, 0x4d, 0x48}, // abort LSN 1/6B374D48
		[]byte{0x00, 0x02, 0xba, 0x61, 0xfe, 0xb8, 0x33, 0x60}, // abort time 2024-05-01 12:00:01.5 UTC
	),
	want: &protocol.StreamAbort{WithAbortInfo: true, Xid: 741, SubXid: 742, AbortLSN: lsnA, AbortTime: ts2},
}}

func TestGoldenStreamAbort(t *testing.T) {
	runGolden(t, goldenStreamAbort)
	if !(&protocol.StreamAbort{Xid: 741, SubXid: 741}).Toplevel() {
		t.Error("Toplevel() = false with xid == subxid")
	}
	if (&protocol.StreamAbort{Xid: 741, SubXid: 742}).Toplevel() {
		t.Error("Toplevel() = true with xid != subxid")
	}
}

var goldenStreamPrepare = []goldenCase{{
	name: "prepare",
	src: bs(
		'p',    // message type
		'\x00', // flags
		[]byte{0x00, 0x00, 0x00, 0x01, 0x6b, 0x37, 0x4d, 0x48}, // prepare LSN
		[]byte{0x00, 0x00, 0x00, 0x01, 0x6b, 0x37, 0x4d, 0x78}, // end LSN
		[]byte{0x00, 0x02, 0xba, 0x61, 0xfe, 0xa1, 0x50, 0x00}, // prepare time
		[]byte{0x00, 0x00, 0x02, 0xe5},                         // xid 741
		"big-batch\x00",                                        // GID
	),
	want: &protocol.StreamPrepare{PrepareLSN: lsnA, EndLSN: lsnB, PrepareTime: ts1, Xid: 741, GID: "big-batch"},
}}

func TestGoldenStreamPrepare(t *testing.T) {
	runGolden(t, goldenStreamPrepare)
}
