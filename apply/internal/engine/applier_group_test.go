package engine

import (
	"testing"
	"time"
)

// TestPending: the applier has work pending (the run loop's receive
// deadline shortens to a millisecond, receiveDeadline) while a group is
// open or a batch is in flight, and not otherwise.
func TestPending(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		set  func(a *Applier)
		want bool
	}{
		{"nothing", func(*Applier) {}, false},
		{"a group", func(a *Applier) { a.group = Group{Count: 5, Opened: now.Add(-time.Hour)} }, true},
		{"a batch in flight", func(a *Applier) { a.sess.(*fakeTarget).flying = &fakeBatch{} }, true},
	} {
		a := &Applier{sess: newFakeTarget()}
		c.set(a)
		if got := a.Pending(); got != c.want {
			t.Errorf("%s: Pending = %v, want %v", c.name, got, c.want)
		}
	}
}
