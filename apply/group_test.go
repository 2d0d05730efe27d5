package apply

import (
	"testing"
	"time"
)

// TestReceiveDeadline checks the run loop's receive deadline: never in
// the past (a passed deadline times out every receive that needs the
// socket, and the loop spins without reading), within about a millisecond
// while work is pending, else at the next feedback.
func TestReceiveDeadline(t *testing.T) {
	base := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, pending := range []string{"nothing", "pending"} {
		for _, off := range []time.Duration{0, 1, 999_999, 1_000_000, 1_500_000} {
			for _, fb := range []time.Duration{100 * time.Microsecond, 2 * time.Millisecond, time.Second} {
				now := base.Add(off)
				next := now.Add(fb)
				d := receiveDeadline(now, next, pending != "nothing")
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
