package engine

import (
	"context"
	"runtime"
	"strconv"
	"testing"

	"github.com/rs/zerolog"
	"github.com/walapply/walapply/protocol"
	pt "github.com/walapply/walapply/protocol/protocoltest"
)

// BenchmarkEngine measures the applier's CPU per source transaction,
// decoding included, on the quiet fake target (no PostgreSQL, no network):
// walapply's own share of a drain without the receive path. small is
// bench's workload of that name (one new row per transaction), pgbench
// its shape (a row of a large table updated, a row of a small one updated
// again and again, a row inserted). Run it under valgrind --tool=callgrind
// with -test.benchtime=Nx for a count of instructions that does not depend
// on the machine's load.
func BenchmarkEngine(b *testing.B) {
	for _, w := range []struct {
		name string
		txn  func(i int, lsn protocol.LSN) [][]byte
	}{
		{"small", func(i int, lsn protocol.LSN) [][]byte {
			return [][]byte{pt.Insert(16384, 0, pt.Text(strconv.Itoa(i)), pt.Text("a row of the small workload"))}
		}},
		{"pgbench", func(i int, lsn protocol.LSN) [][]byte {
			return [][]byte{
				pt.Update(16384, 0, pt.Text(strconv.Itoa(i*7919%1000000)), pt.Text("-4711")),
				pt.Update(16385, 0, pt.Text(strconv.Itoa(i%10)), pt.Text(strconv.Itoa(i))),
				pt.Insert(16386, 0, pt.Text(strconv.Itoa(i)), pt.Text("17")),
			}
		}},
	} {
		const n = 50000 // transactions, generated before timing
		txns := make([][][]byte, n)
		for i := range txns {
			lsn := protocol.LSN(0x1000 + 0x100*i)
			txns[i] = append([][]byte{pt.Begin(lsn, 0, uint32(1000+i))}, w.txn(i, lsn)...)
			txns[i] = append(txns[i], pt.Commit(lsn, lsn+8, 0))
		}
		b.Run(w.name, func(b *testing.B) {
			f := newFakeTarget()
			f.quiet = true
			a := New(zerolog.Nop(), f, Options{Compaction: true, Grouping: true}, 0)
			a.tables = f.tables
			dec, err := protocol.NewDecoder(protocol.DecoderOptions{ProtoVersion: 1})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			handle := func(raw []byte) {
				msg, err := dec.Decode(raw)
				if err != nil {
					b.Fatal(err)
				}
				if _, _, err := a.Handle(ctx, msg); err != nil {
					b.Fatal(err)
				}
			}
			var relations [][]byte
			for id := uint32(16384); id <= 16386; id++ {
				rel := &protocol.Relation{RelationID: id, Namespace: "public", Name: "t" + strconv.Itoa(int(id)), ReplicaIdentity: protocol.ReplicaIdentityDefault,
					Columns: []protocol.RelationColumn{pt.Column("id", 23, true), pt.Column("v", 25, false)}}
				f.tables.addRelation(rel)
				relations = append(relations, pt.Relation(rel.RelationID, 0, rel.Namespace, rel.Name, rel.ReplicaIdentity, rel.Columns...))
			}
			// announce sends the Relation messages, as a stream does
			// before its first change of each relation.
			announce := func() {
				for _, raw := range relations {
					handle(raw)
				}
			}
			announce()
			runtime.GC()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if i%n == 0 && i > 0 {
					b.StopTimer()
					if _, err := a.CommitAndSettle(ctx); err != nil {
						b.Fatal(err)
					}
					// A new stream: LSNs start again from the bottom.
					a = New(zerolog.Nop(), f, Options{Compaction: true, Grouping: true}, 0)
					a.tables = f.tables
					announce()
					b.StartTimer()
				}
				for _, raw := range txns[i%n] {
					handle(raw)
				}
			}
		})
	}
}
