package protocol_test

import (
	"testing"

	"github.com/walapply/walapply/protocol"
)

var goldenBeginPrepare = []goldenCase{{
	name: "begin prepare",
	src: bs(
		'b', // message type
		[]byte{0x00, 0x00, 0x00, 0x01, 0x6b, 0x37, 0x4d, 0x48}, // prepare LSN 1/6B374D48
		[]byte{0x00, 0x00, 0x00, 0x01, 0x6b, 0x37, 0x4d, 0x78}, // end LSN 1/6B374D78
		[]byte{0x00, 0x02, 0xba, 0x61, 0xfe, 0xa1, 0x50, 0x00}, // prepare time
		[]byte{0x00, 0x00, 0x02, 0xe5},                         // xid 741
		"tx-1\x00",                                             // GID
	),
	want: &protocol.BeginPrepare{PrepareLSN: lsnA, EndLSN: lsnB, PrepareTime: ts1, Xid: 741, GID: "tx-1"},
}}

func TestGoldenBeginPrepare(t *testing.T) {
	runGolden(t, goldenBeginPrepare)
}

var goldenPrepare = []goldenCase{{
	name: "prepare",
	src: bs(
		'P',    // message type
		'\x00', // flags
		[]byte{0x00, 0x00, 0x00, 0x01, 0x6b, 0x37, 0x4d, 0x48}, // prepare LSN
		[]byte{0x00, 0x00, 0x00, 0x01, 0x6b, 0x37, 0x4d, 0x78}, // end LSN
		[]byte{0x00, 0x02, 0xba, 0x61, 0xfe, 0xa1, 0x50, 0x00}, // prepare time
		[]byte{0x00, 0x00, 0x02, 0xe5},                         // xid 741
		"it's \"quoted\" \\ ünïcode\x00",                       // GID with quotes, backslash, non-ASCII
	),
	want: &protocol.Prepare{PrepareLSN: lsnA, EndLSN: lsnB, PrepareTime: ts1, Xid: 741, GID: `it's "quoted" \ ünïcode`},
}, {
	name: "empty GID",
	src: bs(
		'P',    // message type
		'\x00', // flags
		[]byte{0x00, 0x00, 0x00, 0x01, 0x6b, 0x37, 0x4d, 0x48}, // prepare LSN
		[]byte{0x00, 0x00, 0x00, 0x01, 0x6b, 0x37, 0x4d, 0x78}, // end LSN
		[]byte{0x00, 0x02, 0xba, 0x61, 0xfe, 0xa1, 0x50, 0x00}, // prepare time
		[]byte{0x00, 0x00, 0x02, 0xe5},                         // xid 741
		"\x00",                                                 // GID ""
	),
	want: &protocol.Prepare{PrepareLSN: lsnA, EndLSN: lsnB, PrepareTime: ts1, Xid: 741},
}}

func TestGoldenPrepare(t *testing.T) {
	runGolden(t, goldenPrepare)
}

var goldenCommitPrepared = []goldenCase{{
	name: "commit prepared",
	src: bs(
		'K',    // message type
		'\x00', // flags
		[]byte{0x00, 0x00, 0x00, 0x01, 0x6b, 0x37, 0x4d, 0x48}, // commit LSN
		[]byte{0x00, 0x00, 0x00, 0x01, 0x6b, 0x37, 0x4d, 0x78}, // end LSN
		[]byte{0x00, 0x02, 0xba, 0x61, 0xfe, 0xb8, 0x33, 0x60}, // commit time
		[]byte{0x00, 0x00, 0x02, 0xe5},                         // xid 741
		"tx-1\x00",                                             // GID
	),
	want: &protocol.CommitPrepared{CommitLSN: lsnA, EndLSN: lsnB, CommitTime: ts2, Xid: 741, GID: "tx-1"},
}}

func TestGoldenCommitPrepared(t *testing.T) {
	runGolden(t, goldenCommitPrepared)
}

var goldenRollbackPrepared = []goldenCase{{
	name: "rollback prepared",
	src: bs(
		'r',    // message type
		'\x00', // flags
		[]byte{0x00, 0x00, 0x00, 0x01, 0x6b, 0x37, 0x4d, 0x48}, // prepare end LSN
		[]byte{0x00, 0x00, 0x00, 0x01, 0x6b, 0x37, 0x4d, 0x78}, // rollback end LSN
		[]byte{0x00, 0x02, 0xba, 0x61, 0xfe, 0xa1, 0x50, 0x00}, // prepare time
		[]byte{0x00, 0x02, 0xba, 0x61, 0xfe, 0xb8, 0x33, 0x60}, // rollback time
		[]byte{0x00, 0x00, 0x02, 0xe5},                         // xid 741
		"tx-1\x00",                                             // GID
	),
	want: &protocol.RollbackPrepared{PrepareEndLSN: lsnA, RollbackEndLSN: lsnB, PrepareTime: ts1, RollbackTime: ts2, Xid: 741, GID: "tx-1"},
}}

func TestGoldenRollbackPrepared(t *testing.T) {
	runGolden(t, goldenRollbackPrepared)
}
