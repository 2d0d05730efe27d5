package compact

import (
	"errors"
	"slices"
	"testing"

	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/protocol"
)

// keyedEntry is relation 1 of two columns, k (its key) and v, mapped one to
// one onto the target.
func keyedEntry() *relmap.Entry {
	return &relmap.Entry{
		Rel: &protocol.Relation{RelationID: 1, ReplicaIdentity: protocol.ReplicaIdentityDefault,
			Columns: []protocol.RelationColumn{{Name: "k", Flags: protocol.ColumnFlagKey}, {Name: "v"}}},
		Tcol: []int{0, 1}, Key: []int{0},
	}
}

// TestCompactorTransitions checks the net-effect rules row by row.
func TestCompactorTransitions(t *testing.T) {
	e := keyedEntry()
	row := func(k, v string) protocol.TupleData {
		c := []protocol.TupleColumn{{Kind: 't', Data: []byte(k)}, {Kind: 't', Data: []byte(v)}}
		if v == "" {
			c[1] = protocol.TupleColumn{Kind: 'u'}
		}
		return protocol.TupleData{Columns: c}
	}
	ins := func(k, v string) protocol.Message { return &protocol.Insert{RelationID: 1, New: row(k, v)} }
	upd := func(k, v string) protocol.Message { return &protocol.Update{RelationID: 1, New: row(k, v)} }
	updKey := func(old, k, v string) protocol.Message {
		return &protocol.Update{RelationID: 1, OldKind: 'K', Old: row(old, "x"), New: row(k, v)}
	}
	del := func(k string) protocol.Message {
		return &protocol.Delete{RelationID: 1, OldKind: 'K', Old: row(k, "x")}
	}
	tests := []struct {
		name     string
		msgs     []protocol.Message
		rejectAt int    // index of the message add must refuse; -1: none
		want     Kind   // net kind of key "1" after the accepted messages
		wantV    string // its image's v ("" for none, "u" for unchanged)
	}{
		{"insert", []protocol.Message{ins("1", "a")}, -1, NetInsert, "a"},
		{"insert update", []protocol.Message{ins("1", "a"), upd("1", "b")}, -1, NetInsert, "b"},
		{"insert update toast keeps value", []protocol.Message{ins("1", "a"), upd("1", "")}, -1, NetInsert, "a"},
		{"update toast stays unchanged", []protocol.Message{upd("1", "")}, -1, NetUpdate, "u"},
		{"insert delete", []protocol.Message{ins("1", "a"), del("1")}, -1, NetNothing, ""},
		{"insert delete insert", []protocol.Message{ins("1", "a"), del("1"), ins("1", "c")}, -1, NetInsert, "c"},
		{"update delete", []protocol.Message{upd("1", "a"), del("1")}, -1, NetDelete, ""},
		{"delete insert", []protocol.Message{del("1"), ins("1", "n")}, -1, NetReplace, "n"},
		{"delete insert update", []protocol.Message{del("1"), ins("1", "n"), upd("1", "m")}, -1, NetReplace, "m"},
		{"replace delete", []protocol.Message{del("1"), ins("1", "n"), del("1")}, -1, NetDelete, ""},
		{"duplicate insert refused", []protocol.Message{ins("1", "a"), ins("1", "b")}, 1, NetInsert, "a"},
		{"update after delete refused", []protocol.Message{del("1"), upd("1", "b")}, 1, NetDelete, ""},
		{"key change refused", []protocol.Message{ins("1", "a"), updKey("1", "2", "b")}, 1, NetInsert, "a"},
		{"same key in old tuple accepted", []protocol.Message{ins("1", "a"), updKey("1", "1", "b")}, -1, NetInsert, "b"},
	}
	for _, tc := range tests {
		c := New()
		for i, m := range tc.msgs {
			ok := c.Add(e, m)
			if ok != (i != tc.rejectAt) {
				t.Fatalf("%s: message %d accepted = %v", tc.name, i, ok)
			}
			if !ok {
				break
			}
		}
		var key protocol.TupleData = row("1", "x")
		r := c.ByRel[1].Rows[string(RowKey(nil, e, &key))]
		if r == nil {
			t.Fatalf("%s: no net row", tc.name)
		}
		if r.Kind != tc.want {
			t.Errorf("%s: net kind %d, want %d", tc.name, r.Kind, tc.want)
		}
		got := ""
		if r.Image != nil {
			if r.Image[1].Kind == 'u' {
				got = "u"
			} else {
				got = string(c.Bytes(r.Image[1]))
			}
		}
		if got != tc.wantV {
			t.Errorf("%s: image v = %q, want %q", tc.name, got, tc.wantV)
		}
	}
}

func TestChunks(t *testing.T) {
	rows := make([]*Row, 300)
	tests := []struct {
		n, perRow int
		want      []int
	}{
		{300, 2, []int{256, 32, 4, 4, 4}},
		{7, 2, []int{4, 1, 1, 1}},
		{0, 2, nil},
		// The parameter limit caps the chunk: 1000 parameters per row allow
		// 32 rows at most, 70000 not even one, which is then sent alone.
		{100, 1000, []int{32, 32, 32, 4}},
		{2, 70000, []int{1, 1}},
	}
	for _, tt := range tests {
		var sizes []int
		if err := Chunks(rows[:tt.n], tt.perRow, func(rs []*Row) error { sizes = append(sizes, len(rs)); return nil }); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(sizes, tt.want) {
			t.Errorf("chunks of %d rows with %d parameters each: %v, want %v", tt.n, tt.perRow, sizes, tt.want)
		}
	}
	// An error from fn stops at once.
	calls := 0
	boom := errors.New("boom")
	if err := Chunks(rows, 2, func([]*Row) error { calls++; return boom }); !errors.Is(err, boom) || calls != 1 {
		t.Errorf("chunks after an error: %v after %d calls, want boom after 1", err, calls)
	}
}
