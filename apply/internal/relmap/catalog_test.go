package relmap

import "testing"

func TestResolveEquality(t *testing.T) {
	const (
		int4 = iota + 1
		json
		int4arr
		jsonarr
		enum
		domainJSON
		int4range
		int4multirange
		compOK
		compBad
		point
	)
	nodes := map[uint32]*typeNode{
		int4:           {typtype: 'b', ownOpclass: true},
		json:           {typtype: 'b'},
		point:          {typtype: 'b'},
		int4arr:        {typtype: 'b', category: 'A', elem: int4},
		jsonarr:        {typtype: 'b', category: 'A', elem: json},
		enum:           {typtype: 'e'},
		domainJSON:     {typtype: 'd', base: json},
		int4range:      {typtype: 'r', rangeSub: int4},
		int4multirange: {typtype: 'm', mrRange: int4range},
		compOK:         {typtype: 'c', attrs: []uint32{int4, enum}},
		compBad:        {typtype: 'c', attrs: []uint32{int4, point}},
	}
	want := map[uint32]bool{int4: true, json: false, point: false, int4arr: true, jsonarr: false, enum: true,
		domainJSON: false, int4range: true, int4multirange: true, compOK: true, compBad: false, 999: false}
	var oids []uint32
	for o := range want {
		oids = append(oids, o)
	}
	got := resolveEquality(nodes, oids)
	for o, w := range want {
		if got[o].has != w {
			t.Errorf("type %d: has equality = %v, want %v", o, got[o].has, w)
		}
	}
	// An extension type's operator lives in the extension's schema; a
	// domain over it uses it too; polymorphic ones are in pg_catalog.
	nodes[100] = &typeNode{typtype: 'b', ownOpclass: true, opSchema: "ext"}
	nodes[101] = &typeNode{typtype: 'd', base: 100}
	nodes[102] = &typeNode{typtype: 'b', category: 'A', elem: 100}
	nodes[int4].opSchema = "pg_catalog"
	got = resolveEquality(nodes, []uint32{100, 101, 102, int4, enum})
	for o, w := range map[uint32]string{100: "ext", 101: "ext", 102: "", int4: "", enum: ""} {
		if got[o].schema != w {
			t.Errorf("type %d: operator schema %q, want %q", o, got[o].schema, w)
		}
	}
}
