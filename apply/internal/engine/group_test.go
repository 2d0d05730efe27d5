package engine

import (
	"testing"
	"time"
)

func TestGroupEnds(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	wait := 50 * time.Millisecond
	cases := []struct {
		name     string
		grouping bool
		count    int
		age      time.Duration
		maxWait  time.Duration
		noGroup  bool
		full     bool
		want     bool
	}{
		{name: "grouping off", grouping: false, want: true},
		{name: "first transaction opens a group", grouping: true, want: false},
		{name: "young group grows", grouping: true, count: 10, age: 10 * time.Millisecond, maxWait: wait, want: false},
		{name: "group open for the maximum wait commits", grouping: true, count: 10, age: wait, maxWait: wait, want: true},
		{name: "old group commits", grouping: true, count: 1, age: time.Second, maxWait: wait, want: true},
		{name: "no age bound without a maximum wait", grouping: true, count: 1, age: time.Hour, want: false},
		{name: "full by transactions", grouping: true, count: MaxGroupTxns - 1, maxWait: wait, want: true},
		{name: "one below full", grouping: true, count: MaxGroupTxns - 2, maxWait: wait, want: false},
		{name: "full by statements", grouping: true, count: 3, maxWait: wait, full: true, want: true},
		{name: "no grouping up to a failed transaction", grouping: true, count: 3, maxWait: wait, noGroup: true, want: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := GroupRules{Grouping: c.grouping, MaxWait: c.maxWait}
			if c.noGroup {
				r.NoGroupThrough = 100
			}
			g := Group{Count: c.count, Opened: t0}
			if got := g.Ends(r, 100, c.full, t0.Add(c.age)); got != c.want {
				t.Errorf("Ends = %v, want %v", got, c.want)
			}
		})
	}
}

// TestGroupJoin: the first transaction opens the group (its first LSN and
// age), every one moves its end.
func TestGroupJoin(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	var g Group
	g.Join(100, 120, 7, t0)
	g.Join(130, 150, 8, t0.Add(time.Second))
	if want := (Group{Count: 2, FirstLSN: 100, End: 150, At: 8, Opened: t0}); g != want {
		t.Errorf("group %+v, want %+v", g, want)
	}
}
