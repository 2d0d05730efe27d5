package relmap

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/walapply/walapply/protocol"
)

// tables is a Catalog over tables kept in memory.
type tables map[string]*Table

func (c tables) LookupTable(_ context.Context, schema, name string) (*Table, bool, error) {
	t, ok := c[schema+"."+name]
	return t, ok, nil
}

func table(cols ...Column) *Table {
	t := &Table{Schema: "public", Name: "t", ByName: map[string]int{}}
	for i, c := range cols {
		t.ByName[c.Name] = i
		t.Columns = append(t.Columns, c)
	}
	return t
}

// TestMap: columns map by name, a generated target column is not written,
// and each way a target table does not fit is a Mismatch saying so.
func TestMap(t *testing.T) {
	rel := &protocol.Relation{RelationID: 1, Name: "t", Columns: []protocol.RelationColumn{
		{Name: "id", Flags: protocol.ColumnFlagKey, TypeOID: 23}, {Name: "v", TypeOID: 25}}}
	ok := table(Column{Name: "extra", TypeOID: 25}, Column{Name: "v", TypeOID: 25, Generated: true}, Column{Name: "id", TypeOID: 23})
	c := NewCache(true)
	c.PutRelation(rel)
	e := c.Rels[1]
	if err := c.Map(context.Background(), tables{"pg_catalog.t": ok}, e); err != nil {
		t.Fatal(err)
	}
	if !e.Mapped || e.Tcol[0] != 2 || e.Tcol[1] != -1 || len(e.Key) != 1 || e.Key[0] != 0 || e.String() != `"pg_catalog"."t"` {
		t.Errorf("mapped %+v, name %s", e, e)
	}
	for name, tc := range map[string]struct {
		t    *Table
		want string
	}{
		"no table":       {nil, "does not exist"},
		"missing column": {table(Column{Name: "id", TypeOID: 23}), `missing replicated column(s) ["v"]`},
		"generated key":  {table(Column{Name: "id", TypeOID: 23, Generated: true}, Column{Name: "v", TypeOID: 25}), "replica identity column is a generated column"},
		"binary type":    {table(Column{Name: "id", TypeOID: 20, TypeName: "bigint"}, Column{Name: "v", TypeOID: 25}), "target column is bigint"},
	} {
		c := NewCache(true)
		c.PutRelation(rel)
		cat := tables{}
		if tc.t != nil {
			cat["pg_catalog.t"] = tc.t
		}
		err := c.Map(context.Background(), cat, c.Rels[1])
		var m *Mismatch
		if !errors.As(err, &m) || !strings.Contains(m.Problem, tc.want) || c.Rels[1].Mapped {
			t.Errorf("%s: %v, want a Mismatch saying %q", name, err, tc.want)
		}
	}
}
