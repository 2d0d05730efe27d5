package protocol_test

import (
	"testing"

	"github.com/walapply/walapply/protocol"
)

var goldenBegin = []goldenCase{{
	name: "begin",
	src: bs(
		'B', // message type
		[]byte{0x00, 0x00, 0x00, 0x01, 0x6b, 0x37, 0x4d, 0x48}, // final LSN 1/6B374D48
		[]byte{0x00, 0x02, 0xba, 0x61, 0xfe, 0xa1, 0x50, 0x00}, // commit time 2024-05-01 12:00:00 UTC
		[]byte{0x00, 0x00, 0x02, 0xe5},                         // xid 741
	),
	want: &protocol.Begin{FinalLSN: lsnA, CommitTime: ts1, Xid: 741},
}}

func TestGoldenBegin(t *testing.T) {
	runGolden(t, goldenBegin)
}

var goldenCommit = []goldenCase{{
	name: "commit",
	src: bs(
		'C',    // message type
		'\x00', // flags
		[]byte{0x00, 0x00, 0x00, 0x01, 0x6b, 0x37, 0x4d, 0x48}, // commit LSN 1/6B374D48
		[]byte{0x00, 0x00, 0x00, 0x01, 0x6b, 0x37, 0x4d, 0x78}, // end LSN 1/6B374D78
		[]byte{0x00, 0x02, 0xba, 0x61, 0xfe, 0xa1, 0x50, 0x00}, // commit time
	),
	want: &protocol.Commit{CommitLSN: lsnA, EndLSN: lsnB, CommitTime: ts1},
}}

func TestGoldenCommit(t *testing.T) {
	runGolden(t, goldenCommit)
}

var goldenOrigin = []goldenCase{{
	name: "after begin",
	src: bs(
		'O', // message type
		[]byte{0x00, 0x00, 0x00, 0x01, 0x6b, 0x37, 0x4d, 0x48}, // origin commit LSN 1/6B374D48
		"pg_16395\x00", // origin name
	),
	want: &protocol.Origin{CommitLSN: lsnA, Name: "pg_16395"},
}, {
	// After the first Stream Start pgoutput sends the origin with LSN
	// 0 and, unlike the changes in the block, no xid.
	name: "in stream, LSN 0",
	src: bs(
		'O',                            // message type
		[]byte{0, 0, 0, 0, 0, 0, 0, 0}, // origin commit LSN 0/0
		"node_a\x00",                   // origin name
	),
	want: &protocol.Origin{Name: "node_a"},
}, {
	name: "empty name",
	src: bs(
		'O', // message type
		[]byte{0x00, 0x00, 0x00, 0x01, 0x6b, 0x37, 0x4d, 0x48}, // origin commit LSN
		"\x00", // origin name ""
	),
	want: &protocol.Origin{CommitLSN: lsnA, Name: ""},
}}

func TestGoldenOrigin(t *testing.T) {
	runGolden(t, goldenOrigin)
}

var goldenLogicalMessage = []goldenCase{{
	name: "transactional",
	src: bs(
		'M',    // message type
		'\x01', // flags: transactional
		[]byte{0x00, 0x00, 0x00, 0x01, 0x6b, 0x37, 0x4d, 0x48}, // message LSN
		"audit\x00",                    // prefix
		[]byte{0x00, 0x00, 0x00, 0x05}, // content length 5
		"hello",                        // content
	),
	want: &protocol.LogicalMessage{Flags: protocol.MessageTransactional, LSN: lsnA, Prefix: "audit", Content: []byte("hello")},
}, {
	name: "non-transactional, binary content",
	src: bs(
		'M',    // message type
		'\x00', // flags: none
		[]byte{0x00, 0x00, 0x00, 0x01, 0x6b, 0x37, 0x4d, 0x78}, // message LSN
		"p\x00",                        // prefix
		[]byte{0x00, 0x00, 0x00, 0x03}, // content length 3
		[]byte{0x00, 0xff, 0x0a},       // content
	),
	want: &protocol.LogicalMessage{LSN: lsnB, Prefix: "p", Content: []byte{0x00, 0xff, 0x0a}},
}, {
	name: "empty content",
	src: bs(
		'M',    // message type
		'\x01', // flags: transactional
		[]byte{0x00, 0x00, 0x00, 0x01, 0x6b, 0x37, 0x4d, 0x48}, // message LSN
		"\x00",                         // prefix ""
		[]byte{0x00, 0x00, 0x00, 0x00}, // content length 0
	),
	want: &protocol.LogicalMessage{Flags: protocol.MessageTransactional, LSN: lsnA, Prefix: "", Content: []byte{}},
}, {
	name: "streamed",
	src: bs(
		'M',                            // message type
		[]byte{0x00, 0x00, 0x02, 0xe6}, // xid 742
		'\x01',                         // flags: transactional
		[]byte{0x00, 0x00, 0x00, 0x01, 0x6b, 0x37, 0x4d, 0x48}, // message LSN
		"audit\x00",                    // prefix
		[]byte{0x00, 0x00, 0x00, 0x02}, // content length 2
		"hi",                           // content
	),
	want: &protocol.LogicalMessage{Streamed: true, Xid: 742, Flags: protocol.MessageTransactional, LSN: lsnA, Prefix: "audit", Content: []byte("hi")},
}}

func TestGoldenLogicalMessage(t *testing.T) {
	runGolden(t, goldenLogicalMessage)
	m := &protocol.LogicalMessage{Flags: protocol.MessageTransactional}
	if !m.Transactional() {
		t.Error("Transactional() = false with flag 1")
	}
	m.Flags = 0
	if m.Transactional() {
		t.Error("Transactional() = true with flags 0")
	}
}

var goldenType = []goldenCase{{
	name: "enum",
	src: bs(
		'Y',                            // message type
		[]byte{0x00, 0x00, 0x40, 0x10}, // type OID 16400
		"public\x00",                   // namespace
		"mood\x00",                     // type name
	),
	want: &protocol.TypeMessage{TypeOID: 16400, Namespace: "public", Name: "mood"},
}, {
	// A domain over a built-in type: the domain's OID with the base
	// type's namespace, sent as "" for pg_catalog.
	name: "domain over pg_catalog type",
	src: bs(
		'Y',                            // message type
		[]byte{0x00, 0x00, 0x40, 0x12}, // type OID 16402
		"\x00",                         // namespace "" (pg_catalog)
		"int4\x00",                     // type name
	),
	want: &protocol.TypeMessage{TypeOID: 16402, Namespace: "", Name: "int4"},
}, {
	name: "streamed",
	src: bs(
		'Y',                            // message type
		[]byte{0x00, 0x00, 0x02, 0xe5}, // xid 741
		[]byte{0x00, 0x00, 0x40, 0x10}, // type OID 16400
		"public\x00",                   // namespace
		"mood\x00",                     // type name
	),
	want: &protocol.TypeMessage{Streamed: true, Xid: 741, TypeOID: 16400, Namespace: "public", Name: "mood"},
}}

func TestGoldenType(t *testing.T) {
	runGolden(t, goldenType)
}
