package protocol_test

import (
	"testing"

	"github.com/walapply/walapply/protocol"
)

var goldenRelation = []goldenCase{{
	name: "default identity",
	src: bs(
		'R',                            // message type
		[]byte{0x00, 0x00, 0x40, 0x00}, // relation OID 16384
		"public\x00",                   // namespace
		"accounts\x00",                 // relation name
		'd',                            // replica identity: default
		[]byte{0x00, 0x03},             // column count 3
		'\x01',                         // column 0 flags: key
		"id\x00",                       // column 0 name
		[]byte{0x00, 0x00, 0x00, 0x14}, // column 0 type OID 20 (int8)
		[]byte{0xff, 0xff, 0xff, 0xff}, // column 0 typmod -1
		'\x00',                         // column 1 flags: none
		"name\x00",                     // column 1 name
		[]byte{0x00, 0x00, 0x04, 0x13}, // column 1 type OID 1043 (varchar)
		[]byte{0x00, 0x00, 0x00, 0x44}, // column 1 typmod 68 (varchar(64))
		'\x00',                         // column 2 flags: none
		"balance\x00",                  // column 2 name
		[]byte{0x00, 0x00, 0x06, 0xa4}, // column 2 type OID 1700 (numeric)
		[]byte{0x00, 0x0c, 0x00, 0x06}, // column 2 typmod numeric(12,2)
	),
	want: &protocol.Relation{
		RelationID: 16384, Namespace: "public", Name: "accounts", ReplicaIdentity: protocol.ReplicaIdentityDefault,
		Columns: []protocol.RelationColumn{
			{Flags: protocol.ColumnFlagKey, Name: "id", TypeOID: 20, TypeMod: -1},
			{Name: "name", TypeOID: 1043, TypeMod: 68},
			{Name: "balance", TypeOID: 1700, TypeMod: 0x000c0006},
		},
	},
}, {
	name: "full identity, streamed",
	src: bs(
		'R',                            // message type
		[]byte{0x00, 0x00, 0x02, 0xe6}, // xid 742
		[]byte{0x00, 0x00, 0x40, 0x06}, // relation OID 16390
		"\x00",                         // namespace "" (pg_catalog)
		"Odd \"Name\"\x00",             // relation name
		'f',                            // replica identity: full
		[]byte{0x00, 0x01},             // column count 1
		'\x01',                         // column 0 flags: key (every column under FULL)
		"doc\x00",                      // column 0 name
		[]byte{0x00, 0x00, 0x0e, 0xda}, // column 0 type OID 3802 (jsonb)
		[]byte{0xff, 0xff, 0xff, 0xff}, // column 0 typmod -1
	),
	want: &protocol.Relation{
		Streamed: true, Xid: 742,
		RelationID: 16390, Namespace: "", Name: `Odd "Name"`, ReplicaIdentity: protocol.ReplicaIdentityFull,
		Columns: []protocol.RelationColumn{{Flags: protocol.ColumnFlagKey, Name: "doc", TypeOID: 3802, TypeMod: -1}},
	},
}, {
	name: "nothing identity, no columns",
	src: bs(
		'R',                            // message type
		[]byte{0x00, 0x00, 0x40, 0x07}, // relation OID 16391
		"s\x00",                        // namespace
		"empty\x00",                    // relation name
		'n',                            // replica identity: nothing
		[]byte{0x00, 0x00},             // column count 0
	),
	want: &protocol.Relation{RelationID: 16391, Namespace: "s", Name: "empty", ReplicaIdentity: protocol.ReplicaIdentityNothing, Columns: []protocol.RelationColumn{}},
}, {
	name: "index identity",
	src: bs(
		'R',                            // message type
		[]byte{0x00, 0x00, 0x40, 0x08}, // relation OID 16392
		"public\x00",                   // namespace
		"t\x00",                        // relation name
		'i',                            // replica identity: index
		[]byte{0x00, 0x01},             // column count 1
		'\x01',                         // column 0 flags: key
		"k\x00",                        // column 0 name
		[]byte{0x00, 0x00, 0x00, 0x17}, // column 0 type OID 23 (int4)
		[]byte{0xff, 0xff, 0xff, 0xff}, // column 0 typmod -1
	),
	want: &protocol.Relation{
		RelationID: 16392, Namespace: "public", Name: "t", ReplicaIdentity: protocol.ReplicaIdentityIndex,
		Columns: []protocol.RelationColumn{{Flags: protocol.ColumnFlagKey, Name: "k", TypeOID: 23, TypeMod: -1}},
	},
}}

func TestGoldenRelation(t *testing.T) {
	runGolden(t, goldenRelation)
	c := protocol.RelationColumn{Flags: protocol.ColumnFlagKey}
	if !c.IsKey() {
		t.Error("IsKey() = false with flag 1")
	}
	if (protocol.RelationColumn{}).IsKey() {
		t.Error("IsKey() = true with flags 0")
	}
}

var goldenInsert = []goldenCase{{
	name: "every column kind",
	src: bs(
		'I',                            // message type
		[]byte{0x00, 0x00, 0x40, 0x00}, // relation OID 16384
		'N',                            // new tuple marker
		[]byte{0x00, 0x05},             // column count 5
		't',                            // column 0 kind: text
		[]byte{0x00, 0x00, 0x00, 0x02}, // column 0 length 2
		"42",                           // column 0 value
		'n',                            // column 1 kind: null
		'u',                            // column 2 kind: unchanged TOAST
		'b',                            // column 3 kind: binary
		[]byte{0x00, 0x00, 0x00, 0x04}, // column 3 length 4
		[]byte{0x00, 0x00, 0x00, 0x2a}, // column 3 value (int4 42)
		't',                            // column 4 kind: text
		[]byte{0x00, 0x00, 0x00, 0x00}, // column 4 length 0 (empty string, not NULL)
	),
	want: &protocol.Insert{RelationID: 16384, New: protocol.TupleData{Columns: []protocol.TupleColumn{
		{Kind: protocol.ColumnText, Data: []byte("42")},
		{Kind: protocol.ColumnNull},
		{Kind: protocol.ColumnUnchanged},
		{Kind: protocol.ColumnBinary, Data: []byte{0, 0, 0, 42}},
		{Kind: protocol.ColumnText, Data: []byte{}},
	}}},
}, {
	name: "streamed",
	src: bs(
		'I',                            // message type
		[]byte{0x00, 0x00, 0x02, 0xe6}, // xid 742 (a subtransaction)
		[]byte{0x00, 0x00, 0x40, 0x00}, // relation OID 16384
		'N',                            // new tuple marker
		[]byte{0x00, 0x01},             // column count 1
		't',                            // column 0 kind: text
		[]byte{0x00, 0x00, 0x00, 0x01}, // column 0 length 1
		"7",                            // column 0 value
	),
	want: &protocol.Insert{Streamed: true, Xid: 742, RelationID: 16384, New: protocol.TupleData{Columns: []protocol.TupleColumn{
		{Kind: protocol.ColumnText, Data: []byte("7")},
	}}},
}, {
	name: "no columns",
	src: bs(
		'I',                            // message type
		[]byte{0x00, 0x00, 0x40, 0x07}, // relation OID 16391
		'N',                            // new tuple marker
		[]byte{0x00, 0x00},             // column count 0
	),
	want: &protocol.Insert{RelationID: 16391}, // a fresh value keeps nil Columns
}}

func TestGoldenInsert(t *testing.T) {
	runGolden(t, goldenInsert)
}

var goldenUpdateNewRow = []protocol.TupleColumn{
	{Kind: protocol.ColumnText, Data: []byte("1")},
	{Kind: protocol.ColumnUnchanged},
}

var goldenUpdate = []goldenCase{{
	name: "no old tuple",
	src: bs(
		'U',                            // message type
		[]byte{0x00, 0x00, 0x40, 0x00}, // relation OID 16384
		'N',                            // new tuple marker
		[]byte{0x00, 0x02},             // column count 2
		't',                            // column 0 kind: text
		[]byte{0x00, 0x00, 0x00, 0x01}, // column 0 length 1
		"1",                            // column 0 value
		'u',                            // column 1 kind: unchanged TOAST
	),
	want: &protocol.Update{RelationID: 16384, New: protocol.TupleData{Columns: goldenUpdateNewRow}},
}, {
	name: "old key",
	src: bs(
		'U',                            // message type
		[]byte{0x00, 0x00, 0x40, 0x00}, // relation OID 16384
		'K',                            // old key marker
		[]byte{0x00, 0x02},             // old column count 2
		't',                            // old column 0 kind: text
		[]byte{0x00, 0x00, 0x00, 0x01}, // old column 0 length 1
		"9",                            // old column 0 value
		'n',                            // old column 1 kind: null (not part of the key)
		'N',                            // new tuple marker
		[]byte{0x00, 0x02},             // column count 2
		't',                            // column 0 kind: text
		[]byte{0x00, 0x00, 0x00, 0x01}, // column 0 length 1
		"1",                            // column 0 value
		'u',                            // column 1 kind: unchanged TOAST
	),
	want: &protocol.Update{
		RelationID: 16384, OldKind: protocol.TupleOldKey,
		Old: protocol.TupleData{Columns: []protocol.TupleColumn{{Kind: protocol.ColumnText, Data: []byte("9")}, {Kind: protocol.ColumnNull}}},
		New: protocol.TupleData{Columns: goldenUpdateNewRow},
	},
}, {
	name: "old row, streamed",
	src: bs(
		'U',                            // message type
		[]byte{0x00, 0x00, 0x02, 0xe5}, // xid 741
		[]byte{0x00, 0x00, 0x40, 0x06}, // relation OID 16390
		'O',                            // old tuple marker
		[]byte{0x00, 0x01},             // old column count 1
		'b',                            // old column 0 kind: binary
		[]byte{0x00, 0x00, 0x00, 0x02}, // old column 0 length 2
		[]byte{0xca, 0xfe},             // old column 0 value
		'N',                            // new tuple marker
		[]byte{0x00, 0x01},             // column count 1
		'b',                            // column 0 kind: binary
		[]byte{0x00, 0x00, 0x00, 0x01}, // column 0 length 1
		[]byte{0x00},                   // column 0 value
	),
	want: &protocol.Update{
		Streamed: true, Xid: 741, RelationID: 16390, OldKind: protocol.TupleOld,
		Old: protocol.TupleData{Columns: []protocol.TupleColumn{{Kind: protocol.ColumnBinary, Data: []byte{0xca, 0xfe}}}},
		New: protocol.TupleData{Columns: []protocol.TupleColumn{{Kind: protocol.ColumnBinary, Data: []byte{0}}}},
	},
}}

func TestGoldenUpdate(t *testing.T) {
	runGolden(t, goldenUpdate)
}

var goldenDelete = []goldenCase{{
	name: "old key",
	src: bs(
		'D',                            // message type
		[]byte{0x00, 0x00, 0x40, 0x00}, // relation OID 16384
		'K',                            // old key marker
		[]byte{0x00, 0x03},             // column count 3
		't',                            // column 0 kind: text
		[]byte{0x00, 0x00, 0x00, 0x02}, // column 0 length 2
		"17",                           // column 0 value
		'n',                            // column 1 kind: null (not part of the key)
		'n',                            // column 2 kind: null (not part of the key)
	),
	want: &protocol.Delete{RelationID: 16384, OldKind: protocol.TupleOldKey, Old: protocol.TupleData{Columns: []protocol.TupleColumn{
		{Kind: protocol.ColumnText, Data: []byte("17")}, {Kind: protocol.ColumnNull}, {Kind: protocol.ColumnNull},
	}}},
}, {
	name: "old row, streamed",
	src: bs(
		'D',                            // message type
		[]byte{0x00, 0x00, 0x02, 0xe5}, // xid 741
		[]byte{0x00, 0x00, 0x40, 0x06}, // relation OID 16390
		'O',                            // old tuple marker
		[]byte{0x00, 0x02},             // column count 2
		't',                            // column 0 kind: text
		[]byte{0x00, 0x00, 0x00, 0x03}, // column 0 length 3
		"{}\n",                         // column 0 value
		'u',                            // column 1 kind: unchanged TOAST
	),
	want: &protocol.Delete{Streamed: true, Xid: 741, RelationID: 16390, OldKind: protocol.TupleOld, Old: protocol.TupleData{Columns: []protocol.TupleColumn{
		{Kind: protocol.ColumnText, Data: []byte("{}\n")}, {Kind: protocol.ColumnUnchanged},
	}}},
}}

func TestGoldenDelete(t *testing.T) {
	runGolden(t, goldenDelete)
}

var goldenTruncate = []goldenCase{{
	name: "one relation",
	src: bs(
		'T',                            // message type
		[]byte{0x00, 0x00, 0x00, 0x01}, // relation count 1
		'\x00',                         // options: none
		[]byte{0x00, 0x00, 0x40, 0x00}, // relation OID 16384
	),
	want: &protocol.Truncate{RelationIDs: []uint32{16384}},
}, {
	name: "cascade, restart identity",
	src: bs(
		'T',                            // message type
		[]byte{0x00, 0x00, 0x00, 0x02}, // relation count 2
		'\x03',                         // options: CASCADE | RESTART IDENTITY
		[]byte{0x00, 0x00, 0x40, 0x00}, // relation OID 16384
		[]byte{0x00, 0x00, 0x40, 0x06}, // relation OID 16390
	),
	want: &protocol.Truncate{Options: protocol.TruncateCascade | protocol.TruncateRestartIdentity, RelationIDs: []uint32{16384, 16390}},
}, {
	name: "streamed, restart identity",
	src: bs(
		'T',                            // message type
		[]byte{0x00, 0x00, 0x02, 0xe5}, // xid 741
		[]byte{0x00, 0x00, 0x00, 0x01}, // relation count 1
		'\x02',                         // options: RESTART IDENTITY
		[]byte{0x00, 0x00, 0x40, 0x06}, // relation OID 16390
	),
	want: &protocol.Truncate{Streamed: true, Xid: 741, Options: protocol.TruncateRestartIdentity, RelationIDs: []uint32{16390}},
}}

func TestGoldenTruncate(t *testing.T) {
	runGolden(t, goldenTruncate)
}
