package compact

import (
	"fmt"
	"strings"
	"testing"

	"github.com/walapply/walapply/protocol"
)

// TestSlabKeys checks the map keys that live in the slab: keys of every
// size (many to a chunk, one that ends a chunk, one larger than a chunk)
// still find their rows and still read as the key they were made from
// after later keys filled more chunks, and after Reset a second write-out
// reusing the chunks sees only its own rows.
func TestSlabKeys(t *testing.T) {
	e := keyedEntry()
	ins := func(k string) *protocol.Insert {
		return &protocol.Insert{RelationID: 1, New: protocol.TupleData{Columns: []protocol.TupleColumn{
			{Kind: 't', Data: []byte(k)}, {Kind: 't', Data: []byte("v" + k)}}}}
	}
	for _, tc := range []struct {
		name string
		keys func(round int) []string
	}{
		{"many small keys over several chunks", func(round int) []string {
			var ks []string
			for i := range 20000 {
				ks = append(ks, fmt.Sprintf("r%d-%d", round, i))
			}
			return ks
		}},
		{"keys near and above a chunk's size", func(round int) []string {
			return []string{
				strings.Repeat("a", slabKeyBytes-40) + fmt.Sprint(round),
				strings.Repeat("b", slabKeyBytes/2) + fmt.Sprint(round),
				strings.Repeat("c", slabKeyBytes+1) + fmt.Sprint(round),
				"short" + fmt.Sprint(round),
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New()
			for round := range 3 {
				keys := tc.keys(round)
				for _, k := range keys {
					if !c.Add(e, ins(k)) {
						t.Fatalf("round %d: insert of key %.20q refused", round, k)
					}
				}
				tab := c.ByRel[1]
				if len(tab.Rows) != len(keys) || len(tab.Order) != len(keys) {
					t.Fatalf("round %d: %d rows, %d in order, want %d", round, len(tab.Rows), len(tab.Order), len(keys))
				}
				for i, k := range keys {
					want := string(RowKey(nil, e, &ins(k).New))
					if tab.Order[i] != want {
						t.Fatalf("round %d: key %d reads %.30q, want %.30q", round, i, tab.Order[i], want)
					}
					r := tab.Rows[want]
					if r == nil || r.Kind != NetInsert || string(c.Bytes(r.Image[1])) != "v"+k {
						t.Fatalf("round %d: key %d finds %+v", round, i, r)
					}
				}
				c.Reset()
			}
		})
	}
}
