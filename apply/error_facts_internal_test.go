package apply

import "testing"

func TestPlainRelation(t *testing.T) {
	for in, want := range map[string]string{
		`"public"."t"`:          "public.t",
		`"My ""Schema"""."a.b"`: `My "Schema".a.b`,
		`"public"."t`:           `"public"."t`,
		`public.t`:              "public.t",
		`"s"x`:                  `"s"x`,
	} {
		if got := plainRelation(in); got != want {
			t.Errorf("plainRelation(%s) = %s, want %s", in, got, want)
		}
	}
}
