package apply_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/walapply/walapply/testenv"
)

// TestTopologyCascade runs A → B → C. The first hop replicates everything;
// on the second hop, origin = any forwards A's changes (which B received
// from walapply, under its origin) to C exactly once, while origin = none
// forwards only the changes made on B itself. The second hop's progress
// reports where the last transaction came from: the A → B applier's origin
// when it was one of A's changes, nothing with origin = none. A large
// transaction of A's is streamed by B (in-progress streaming, its Origin in
// the first stream block) and filtered or forwarded the same way.
func TestTopologyCascade(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		for _, second := range []string{"any", "none"} {
			t.Run("second hop origin="+second, func(t *testing.T) {
				if second == "none" {
					topoSkipBefore16(t, version)
				}
				// B streams large transactions to C (64kB of changes), so
				// that A's large transaction below reaches the second hop
				// as a streamed transaction, its Origin in the first block.
				a := testenv.NewCluster(t, testenv.Options{Version: version})
				b := testenv.NewCluster(t, testenv.Options{Version: version, Settings: map[string]string{"logical_decoding_work_mem": "64kB"}})
				c := testenv.NewCluster(t, testenv.Options{Version: version})
				cs := []*testenv.Cluster{a, b, c}
				for _, n := range cs {
					testenv.MustExec(t, n, "postgres", `CREATE TABLE items (id int PRIMARY KEY, made_on text NOT NULL, v int NOT NULL)`)
				}
				testenv.MustExec(t, a, "postgres", `CREATE PUBLICATION pub FOR TABLE items`)
				testenv.MustExec(t, b, "postgres", `CREATE PUBLICATION pub FOR TABLE items`)
				ab, bc := topoLink(t, a, b), topoLink(t, b, c)
				ab.createSlot("a_to_b")
				bc.createSlot("b_to_c")
				ab.runApplier(topoConfig(ab, "a_to_b", "", "pub"))
				var progress topoProgress
				cfg := topoConfig(bc, "b_to_c", second, "pub")
				cfg.OnProgress = progress.record
				bc.runApplier(cfg)
				settle := func() { t.Helper(); topoSettle(topoSlot{ab, "a_to_b"}, topoSlot{bc, "b_to_c"}) }

				// A's rows, then B's own, then an update of A's rows on A:
				// the last transaction in B's WAL is one walapply applied.
				testenv.MustExec(t, a, "postgres", `INSERT INTO items SELECT g, 'a', 0 FROM generate_series(1, 40) g`)
				settle()
				testenv.MustExec(t, b, "postgres", `INSERT INTO items SELECT g, 'b', 0 FROM generate_series(101, 120) g`)
				testenv.MustExec(t, a, "postgres", `UPDATE items SET v = id * 2 WHERE id <= 10`)
				settle()

				aRows := topoRowsText(topoRange(1, 40), "a", func(id int) int {
					if id <= 10 {
						return id * 2
					}
					return 0
				})
				bRows := topoRowsText(topoRange(101, 120), "b", func(int) int { return 0 })
				const q = `SELECT (id, made_on, v)::text FROM items`
				topoExpect(t, b, "B", q, slices.Concat(aRows, bRows))
				switch second {
				case "any":
					topoExpect(t, c, "C (origin any: A's changes forwarded once, B's own too)", q, slices.Concat(aRows, bRows))
					progress.waitLastOrigin(bc, "walapply_a_to_b")
				case "none":
					topoExpect(t, c, "C (origin none: only B's own changes)", q, bRows)
				}

				// B's own changes keep flowing after A's were filtered or
				// forwarded, and the second hop's progress follows them.
				testenv.MustExec(t, b, "postgres", `UPDATE items SET v = 7 WHERE id = 101`)
				settle()
				bRows[0] = fmt.Sprintf("(%d,b,%d)", 101, 7)
				if second == "any" {
					topoExpect(t, c, "C after B's update", q, slices.Concat(aRows, bRows))
					progress.waitLastOrigin(bc, "")
				} else {
					topoExpect(t, c, "C after B's update", q, bRows)
				}

				// A large transaction on A: applied on B in one
				// transaction, streamed from B to C, where the origin
				// filter applies to it like to any other.
				testenv.MustExec(t, a, "postgres", `INSERT INTO items SELECT g, 'a', 1 FROM generate_series(1001, 4000) g`)
				settle()
				streamed := topoRows(t, b, `SELECT (stream_txns > 0)::text FROM pg_stat_replication_slots WHERE slot_name = 'b_to_c'`)
				big := topoRowsText(topoRange(1001, 4000), "a", func(int) int { return 1 })
				if second == "any" {
					if !slices.Equal(streamed, []string{"true"}) {
						t.Errorf("B did not stream the large transaction to C (stream_txns > 0: %q); the streamed path is not tested", streamed)
					}
					topoExpect(t, c, "C after A's large transaction", q, slices.Concat(aRows, bRows, big))
					progress.waitLastOrigin(bc, "walapply_a_to_b")
				} else {
					topoExpect(t, c, "C after A's large transaction", q, bRows)
				}
				topoExpect(t, b, "B after A's large transaction", q, slices.Concat(aRows, bRows, big))
				if second == "none" {
					if seen := progress.seen(); slices.ContainsFunc(seen, func(o string) bool { return o != "" }) {
						t.Errorf("with origin none the second hop reported transactions from origins %q", seen)
					}
				}
			})
		}
	})
}
