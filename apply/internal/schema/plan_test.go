package schema

import (
	"context"
	"reflect"
	"testing"
)

// TestPlanFor: what the pre-data section creates, what it leaves alone and
// what stands in its way, from the two catalogs (fakeCatalog).
func TestPlanFor(t *testing.T) {
	accounts, m, m1 := Object{"app", "accounts"}, Object{"Other Sch", "m"}, Object{"Other Sch", "m_1"}
	seq, m1seq := Object{"app", "accounts_id_seq"}, Object{"Other Sch", "m_1_id_seq"}
	mood, touch := Object{"app", "mood"}, Object{"app", "touch()"}
	src := &fakeCatalog{
		columns: map[Object][]string{
			accounts: {"id integer", "mood app.mood"},
			m:        {"id bigint", "at date"},
			m1:       {"id bigint", "at date"},
		},
		relatives: map[Object][]Object{m: {m1}},
		owned:     map[Object][]Object{accounts: {seq}, m1: {m1seq}},
		used:      map[Object][]Object{accounts: {mood}},
		triggers:  map[Object][]Object{accounts: {touch}},
		defs:      map[Object]string{mood: "e:sad,ok", touch: "BEGIN RETURN NEW; END"},
	}
	for _, tc := range []struct {
		name   string
		target *fakeCatalog
		want   *Plan
	}{{
		name:   "empty target",
		target: &fakeCatalog{},
		want: &Plan{Tables: []Object{accounts, m, m1}, Types: map[Object]bool{mood: true}, Funcs: map[Object]bool{touch: true},
			Schemas: []string{"Other Sch", "app"}},
	}, {
		name: "identical empty table, same type and function",
		target: &fakeCatalog{
			columns: map[Object][]string{accounts: {"id integer", "mood app.mood"}},
			seqs:    map[Object]bool{seq: true}, // the existing table's own
			defs:    map[Object]string{mood: "e:sad,ok", touch: "BEGIN RETURN NEW; END"},
		},
		want: &Plan{Tables: []Object{m, m1}, Types: map[Object]bool{}, Funcs: map[Object]bool{}, Schemas: []string{"Other Sch"}},
	}, {
		name: "every conflict",
		target: &fakeCatalog{
			columns: map[Object][]string{accounts: {"id bigint", "mood app.mood"}, m: {"id bigint", "at date"}},
			full:    map[Object]bool{m: true},
			seqs:    map[Object]bool{m1seq: true},
			defs:    map[Object]string{mood: "e:sad,ok,happy", touch: "BEGIN RETURN OLD; END"},
		},
		want: &Plan{Conflicts: []string{
			`table "app"."accounts" exists on the target with other columns ("id" bigint, "mood" app.mood) than on the source ("id" integer, "mood" app.mood)`,
			`table "Other Sch"."m" exists on the target and is not empty`,
			`relation "Other Sch"."m_1_id_seq", the sequence of table "Other Sch"."m_1", already exists on the target`,
			`type "app".mood exists on the target with another definition than on the source`,
			`function "app".touch() exists on the target with another definition than on the source`,
		}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PlanFor(context.Background(), src, tc.target, []Object{accounts, m})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("plan\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}
