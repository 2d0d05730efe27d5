package sqlgen

import "testing"

func TestNames(t *testing.T) {
	rels := []Rel{{"public", "t"}, {"My Schema", `we"ird`}}
	for _, tc := range []struct{ what, got, want string }{
		{"Rel.String", rels[1].String(), `"My Schema"."we""ird"`},
		{"Rel.LogName", rels[1].LogName(), `My Schema.we"ird`},
		{"LogRelations", LogRelations(rels), `public.t, My Schema.we"ird`},
		{"LogRelations of none", LogRelations(nil), ""},
		{"QuoteList", QuoteList([]string{"a", "B", `c"d`}), `"a", "B", "c""d"`},
		{"QuoteList of none", QuoteList(nil), ""},
		{"QuoteLiteral", QuoteLiteral(`it's a \ test`), `'it''s a \ test'`},
		{"QuoteLiteral of two quotes", QuoteLiteral(`''`), `''''''`},
		{"QuoteLiteral empty", QuoteLiteral(""), `''`},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.what, tc.got, tc.want)
		}
	}
}
