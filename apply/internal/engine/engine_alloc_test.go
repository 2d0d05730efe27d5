package engine

import (
	"context"
	"strconv"
	"testing"

	"github.com/rs/zerolog"
	"github.com/walapply/walapply/protocol"
	pt "github.com/walapply/walapply/protocol/protocoltest"
)

// TestAllocs measures the applier's hot path once warm, decoding included,
// on the fake target (which allocates nothing itself in quiet mode): the
// allocations of a source transaction of an insert, an update and a delete
// less those of an empty one, which commits all the same. The rows differ
// from run to run, as on a real stream: transaction i inserts row i,
// updates row i-1 and deletes row i-2.
//
// One statement per change allocates nothing per change. Compaction keeps
// a net row per key (internal/compact): a row it has not seen in the group
// costs nothing either, its compact.Row, its image and its map key coming
// from storage that the next write-out reuses (internal/compact/slab.go);
// nor do an update merged into a row and a delete that cancels an insert. A commit allocates
// (the commit mark and the origin advance's two text parameters), once per
// target transaction, not per change.
func TestAllocs(t *testing.T) {
	for _, c := range []struct {
		name                 string
		compaction, grouping bool
		want                 float64 // per transaction of 3 changes
	}{
		{"one statement per change", false, false, 0},
		{"grouped and compacted", true, true, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			full := allocsPerTxn(t, c.compaction, c.grouping, true)
			empty := allocsPerTxn(t, c.compaction, c.grouping, false)
			t.Logf("%.2f allocations per transaction of 3 changes, %.2f per empty one", full, empty)
			if full-empty > c.want {
				t.Errorf("%.2f allocations for the 3 changes of a transaction once warm, want at most %v", full-empty, c.want)
			}
		})
	}
}

// allocsPerTxn returns the allocations per transaction once warm, with
// its 3 changes or without.
func allocsPerTxn(t *testing.T, compaction, grouping, changes bool) float64 {
	const warm, runs = 25000, 2000
	f := newFakeTarget()
	f.quiet = true
	a := New(zerolog.Nop(), f, Options{Compaction: compaction, Grouping: grouping}, 0)
	a.tables = f.tables
	dec, err := protocol.NewDecoder(protocol.DecoderOptions{ProtoVersion: 1})
	if err != nil {
		t.Fatal(err)
	}
	rel := &protocol.Relation{RelationID: 16384, Namespace: "public", Name: "t", ReplicaIdentity: protocol.ReplicaIdentityDefault,
		Columns: []protocol.RelationColumn{pt.Column("id", 23, true), pt.Column("v", 25, false)}}
	f.tables.addRelation(rel)
	ctx := context.Background()
	handle := func(raw []byte) {
		msg, err := dec.Decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := a.Handle(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	handle(pt.Relation(rel.RelationID, 0, rel.Namespace, rel.Name, rel.ReplicaIdentity, rel.Columns...))
	txns := make([][][]byte, warm+runs+1)
	for i := range txns {
		lsn := protocol.LSN(0x1000 + 0x100*i)
		key := func(k int) pt.Col { return pt.Text(strconv.Itoa(k)) }
		txns[i] = [][]byte{pt.Begin(lsn, 0, uint32(1000+i))}
		if changes {
			txns[i] = append(txns[i],
				pt.Insert(16384, 0, key(i), pt.Text("a")),
				pt.Update(16384, 0, key(i-1), pt.Text("b")),
				pt.Delete(16384, 0, 'K', key(i-2), pt.Null()))
		}
		txns[i] = append(txns[i], pt.Commit(lsn, lsn+8, 0))
	}
	n := 0
	txn := func() {
		for _, raw := range txns[n] {
			handle(raw)
		}
		n++
	}
	for n < warm {
		txn()
	}
	return testing.AllocsPerRun(runs, txn)
}

func TestAppendLSN(t *testing.T) {
	for _, l := range []protocol.LSN{0, 1, 0xABCDEF, 0x1_0000_0000, 0xFFFFFFFF_FFFFFFFF, 0x16_B374D848} {
		if got := string(appendLSN([]byte("x"), l)); got != "x"+l.String() {
			t.Errorf("appendLSN(%s) = %q", l, got)
		}
	}
}
