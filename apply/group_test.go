package apply

import (
	"testing"
	"time"

	"github.com/walapply/walapply/apply/internal/pipeline"
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
		queued   int
		want     bool
	}{
		{name: "grouping off", grouping: false, want: true},
		{name: "first transaction opens a group", grouping: true, want: false},
		{name: "young group grows", grouping: true, count: 10, age: 10 * time.Millisecond, maxWait: wait, want: false},
		{name: "group open for the maximum wait commits", grouping: true, count: 10, age: wait, maxWait: wait, want: true},
		{name: "old group commits", grouping: true, count: 1, age: time.Second, maxWait: wait, want: true},
		{name: "no age bound without a maximum wait", grouping: true, count: 1, age: time.Hour, want: false},
		{name: "full by transactions", grouping: true, count: maxGroupTxns - 1, maxWait: wait, want: true},
		{name: "one below full", grouping: true, count: maxGroupTxns - 2, maxWait: wait, want: false},
		{name: "full by statements", grouping: true, count: 3, maxWait: wait, queued: pipeline.MaxBatchStatements, want: true},
		{name: "no grouping up to a failed transaction", grouping: true, count: 3, maxWait: wait, noGroup: true, want: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := &applier{grouping: c.grouping, groupMaxWait: c.maxWait, sess: &pipeline.Session{StmtQueue: pipeline.StmtQueue{Queued: make([]pipeline.Stmt, c.queued)}}}
			a.txn.finalLSN = 100
			if c.noGroup {
				a.noGroupThrough = 100
			}
			a.group = txnGroup{count: c.count, opened: t0}
			if got := a.groupEnds(t0.Add(c.age)); got != c.want {
				t.Errorf("groupEnds = %v, want %v", got, c.want)
			}
		})
	}
}

// TestReceiveDeadline checks the run loop's receive deadline: never in
// the past (a passed deadline times out every receive that needs the
// socket, and the loop spins without reading), within about a millisecond
// while work is pending, else at the next feedback.
func TestReceiveDeadline(t *testing.T) {
	base := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, pending := range []string{"nothing", "group", "batch in flight"} {
		for _, off := range []time.Duration{0, 1, 999_999, 1_000_000, 1_500_000} {
			for _, fb := range []time.Duration{100 * time.Microsecond, 2 * time.Millisecond, time.Second} {
				now := base.Add(off)
				next := now.Add(fb)
				s := &session{cfg: &Config{}, applier: &applier{sess: newFakeTarget()}}
				switch pending {
				case "group":
					s.applier.group = txnGroup{count: 5, opened: now.Add(-time.Hour)}
				case "batch in flight":
					s.applier.sess.(*fakeTarget).flying = &fakeBatch{}
				}
				d := s.receiveDeadline(now, next)
				if !d.After(now) {
					t.Errorf("%s, now+%v, feedback in %v: deadline %v is not after now", pending, off, fb, d.Sub(now))
				}
				if d.Sub(d.Truncate(time.Millisecond)) != 0 {
					t.Errorf("%s, now+%v: deadline %v is not a whole millisecond", pending, off, d)
				}
				limit := next.Add(time.Millisecond)
				if pending != "nothing" {
					limit = now.Add(2 * time.Millisecond)
				}
				if d.After(limit) {
					t.Errorf("%s, now+%v, feedback in %v: deadline %v after now, later than %v", pending, off, fb, d.Sub(now), limit.Sub(now))
				}
				if pending == "nothing" && d.Before(next) {
					t.Errorf("nothing pending, now+%v, feedback in %v: deadline %v before the feedback", off, fb, d.Sub(now))
				}
			}
		}
	}
}
