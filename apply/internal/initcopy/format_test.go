package initcopy

import "testing"

func TestBinaryColumn(t *testing.T) {
	int4 := copyColumnType{oid: 23, format: "integer", name: "pg_catalog.int4", kind: "b", send: true, receive: true}
	with := func(f func(*copyColumnType)) copyColumnType { c := int4; f(&c); return c }
	mood := copyColumnType{oid: 16390, format: "mood", name: "public.mood", kind: "e", send: true, receive: true}
	for name, c := range map[string]struct {
		s, d copyColumnType
		want bool
	}{
		"same built-in":        {int4, int4, true},
		"int4 into int8":       {int4, with(func(c *copyColumnType) { c.oid, c.format, c.name = 20, "bigint", "pg_catalog.int8" }), false},
		"other typmod":         {with(func(c *copyColumnType) { c.format = "numeric(12,3)" }), with(func(c *copyColumnType) { c.format = "numeric" }), false},
		"no send":              {with(func(c *copyColumnType) { c.send = false }), int4, false},
		"no receive":           {int4, with(func(c *copyColumnType) { c.receive = false }), false},
		"oid alias":            {with(func(c *copyColumnType) { c.oidAlias = true }), with(func(c *copyColumnType) { c.oidAlias = true }), false},
		"user base type":       {with(func(c *copyColumnType) { c.oid = 16400 }), with(func(c *copyColumnType) { c.oid = 16400 }), false},
		"composite":            {with(func(c *copyColumnType) { c.kind = "c" }), with(func(c *copyColumnType) { c.kind = "c" }), false},
		"domain":               {with(func(c *copyColumnType) { c.kind = "d" }), with(func(c *copyColumnType) { c.kind = "d" }), false},
		"enum, other OID":      {mood, with(func(c *copyColumnType) { *c = mood; c.oid = 17000 }), true},
		"enum of another name": {mood, with(func(c *copyColumnType) { *c = mood; c.name = "other.mood" }), false},
	} {
		if got := binaryColumn(c.s, c.d); got != c.want {
			t.Errorf("%s: binaryColumn = %v, want %v", name, got, c.want)
		}
	}
}
