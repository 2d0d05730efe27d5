package filegraph

import (
	"reflect"
	"testing"
)

func TestCycle(t *testing.T) {
	g, err := Load("testdata/cycle")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a.go", "b.go", "c.go", "d.go"}; !reflect.DeepEqual(g.Files, want) {
		t.Errorf("Files = %v, want %v", g.Files, want)
	}
	comps := g.Components()
	want := [][]string{{"a.go", "b.go"}, {"c.go"}, {"d.go"}}
	if !reflect.DeepEqual(comps, want) {
		t.Errorf("Components = %v, want %v", comps, want)
	}
	if got, want := g.Mutual(), [][2]string{{"a.go", "b.go"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Mutual = %v, want %v", got, want)
	}
	if !g.Uses["c.go"]["a.go"] || g.Uses["a.go"]["c.go"] {
		t.Errorf("Uses[c.go] = %v, Uses[a.go] = %v: want c.go -> a.go only", g.Uses["c.go"], g.Uses["a.go"])
	}
}
