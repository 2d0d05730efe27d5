package apply

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/walapply/walapply/protocol"
)

func TestParseSnapshot(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want copySnapshot
		err  string
	}{
		{in: "10:20:", want: copySnapshot{xmin: 10, xmax: 20}},
		{in: "10:20:15,11,19", want: copySnapshot{xmin: 10, xmax: 20, xip: []uint64{11, 15, 19}}},
		{in: "4294967300:4294967310:4294967301", want: copySnapshot{xmin: 4294967300, xmax: 4294967310, xip: []uint64{4294967301}}},
		{in: "10:20", err: "want xmin:xmax:xip-list"},
		{in: "x:20:", err: "xmin"},
		{in: "10:y:", err: "xmax"},
		{in: "20:10:", err: "xmax is below xmin"},
		{in: "10:20:9", err: "outside"},
		{in: "10:20:20", err: "outside"},
		{in: "10:20:1a", err: "xip"},
	} {
		got, err := parseSnapshot(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseSnapshot(%q) error = %v, want one containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got.xmin != tc.want.xmin || got.xmax != tc.want.xmax || !slices.Equal(got.xip, tc.want.xip) {
			t.Errorf("parseSnapshot(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestWidenXid(t *testing.T) {
	const epoch = uint64(1) << 32
	for _, tc := range []struct {
		xid  uint32
		ref  uint64
		want uint64
	}{
		{xid: 100, ref: 200, want: 100},
		{xid: 300, ref: 200, want: 300},
		{xid: 5, ref: 3, want: 5},
		{xid: math.MaxUint32 - 5, ref: 3, want: math.MaxUint32 - 5}, // no epoch before the first
		{xid: 10, ref: 2*epoch + 5, want: 2*epoch + 10},
		{xid: math.MaxUint32 - 10, ref: 2*epoch + 5, want: 2*epoch - 11}, // just before the wrap
		{xid: 20, ref: 2*epoch - 5, want: 2*epoch + 20},                  // just after it
		{xid: 1 << 31, ref: epoch, want: epoch + 1<<31 - 1<<32},
	} {
		if got := widenXid(tc.xid, tc.ref); got != tc.want {
			t.Errorf("widenXid(%d, %d) = %d, want %d", tc.xid, tc.ref, got, tc.want)
		}
	}
}

func TestSnapshotVisible(t *testing.T) {
	const epoch = uint64(1) << 32
	s := copySnapshot{xmin: epoch + 100, xmax: epoch + 110, xip: []uint64{epoch + 100, epoch + 105}}
	for xid, want := range map[uint32]bool{
		50:  true,  // finished before xmin
		99:  true,  // idem
		100: false, // in progress
		101: true,  // committed between xmin and xmax
		105: false, // in progress
		109: true,
		110: false, // started after the snapshot
		500: false,
	} {
		if got := s.visible(xid); got != want {
			t.Errorf("visible(%d) = %v, want %v", xid, got, want)
		}
	}
}

// filterApplier is an applier with relations 1 (public.a), 2 (public.b)
// and 3 (s.c), for the filter's tests.
func filterApplier() *Applier {
	a := &Applier{rels: NewRelationCache(false)}
	for i, n := range []relName{{"public", "a"}, {"public", "b"}, {"s", "c"}} {
		a.rels.PutRelation(&protocol.Relation{RelationID: uint32(i + 1), Namespace: n.schema, Name: n.name})
	}
	return a
}

func TestCopyFilter(t *testing.T) {
	snap, err := parseSnapshot("100:120:100,115")
	if err != nil {
		t.Fatal(err)
	}
	// public.b was copied in the snapshot at 0/5000, s.c at 0/6000 in
	// the same snapshot; public.a is not filtered.
	f := &copyFilter{tables: map[relName]*copiedTable{
		{"public", "b"}: {lsn: 0x5000, snap: snap},
		{"s", "c"}:      {lsn: 0x6000, snap: snap},
	}, until: 0x6000}
	a := filterApplier()
	ins := func(rel uint32) protocol.Message { return &protocol.Insert{RelationID: rel} }
	for _, tc := range []struct {
		name  string
		xid   uint32
		final protocol.LSN
		msg   protocol.Message
		kept  bool
	}{
		{"other table", 101, 0x4000, ins(1), true},
		{"visible, before the copy point", 101, 0x4000, ins(2), false},
		{"update, visible", 101, 0x4000, &protocol.Update{RelationID: 2}, false},
		{"delete, visible", 101, 0x4000, &protocol.Delete{RelationID: 3}, false},
		{"at the copy point", 101, 0x5000, ins(2), true},
		{"after the copy point", 101, 0x5001, ins(2), true},
		{"past every copy point", 101, 0x6000, ins(3), true},
		{"before the point of one, after the other", 101, 0x5500, ins(3), false},
		// A transaction prepared before the copy point and committed
		// after it (in progress in the snapshot): its changes are not in
		// the copy.
		{"in progress in the snapshot", 115, 0x4000, ins(2), true},
		{"started after the snapshot", 130, 0x4000, ins(2), true},
		{"finished before the snapshot", 90, 0x4000, ins(2), false},
		{"unknown relation", 101, 0x4000, ins(9), true},
		{"logical message", 101, 0x4000, &protocol.LogicalMessage{}, true},
	} {
		a.txn = openTxn{xid: tc.xid, finalLSN: tc.final}
		got := f.filter(a, tc.msg)
		if kept := got != nil; kept != tc.kept || (kept && got != tc.msg) {
			t.Errorf("%s: filter returned %v, want kept=%v (the same message)", tc.name, got, tc.kept)
		}
	}

	// TRUNCATE of several tables keeps the tables whose copies do not
	// hold it.
	a.txn = openTxn{xid: 101, finalLSN: 0x4000}
	tr := &protocol.Truncate{Options: protocol.TruncateCascade, RelationIDs: []uint32{1, 2, 3}}
	got, ok := f.filter(a, tr).(*protocol.Truncate)
	if !ok || !slices.Equal(got.RelationIDs, []uint32{1}) || got.Options != protocol.TruncateCascade {
		t.Errorf("filtered TRUNCATE = %+v, want relations [1] with CASCADE", got)
	}
	if !slices.Equal(tr.RelationIDs, []uint32{1, 2, 3}) {
		t.Errorf("the filter changed the message it was given: %v", tr.RelationIDs)
	}
	if got := f.filter(a, &protocol.Truncate{RelationIDs: []uint32{2, 3}}); got != nil {
		t.Errorf("TRUNCATE of filtered tables only = %+v, want nil", got)
	}
	if got := f.filter(a, tr); got == tr {
		t.Error("TRUNCATE with a filtered table came back unchanged")
	}
	a.txn.finalLSN = 0x7000
	if got := f.filter(a, tr); got != tr {
		t.Errorf("TRUNCATE after every copy point = %+v, want the message itself", got)
	}

	var nilFilter *copyFilter
	a.txn = openTxn{xid: 101, finalLSN: 0x10}
	if m := ins(2); nilFilter.filter(a, m) != m {
		t.Error("a nil filter dropped a change")
	}
}
