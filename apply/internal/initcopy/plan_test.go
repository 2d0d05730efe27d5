package initcopy

import (
	"strings"
	"testing"
)

// TestDecide: what a start does about the initial copy, for every
// combination of what is asked, recorded and found; each refusal says
// what to do.
func TestDecide(t *testing.T) {
	unfinished := Record{Exists: true, Slot: "s", Point: 0x1000}
	for _, tc := range []struct {
		name string
		f    Facts
		want Action
		err  string
	}{
		{name: "no copy asked, none recorded", f: Facts{}, want: Nothing},
		{name: "finished copy, not asked", f: Facts{Rec: Record{Exists: true, Finished: true}}, want: Nothing},
		{name: "finished copy, asked again", f: Facts{Asked: true, Slot: "s", Rec: Record{Exists: true, Slot: "s", Finished: true}, SlotFound: true, Origin: 0x2000}, want: Nothing},
		{name: "unfinished copy, not asked", f: Facts{Rec: unfinished}, err: "run again with --copy"},
		{name: "fresh", f: Facts{Asked: true, Slot: "s"}, want: Fresh},
		{name: "fresh, origin has progress", f: Facts{Asked: true, Slot: "s", Origin: 0x10}, err: "already replicates"},
		{name: "fresh, slot exists", f: Facts{Asked: true, Slot: "s", SlotFound: true}, err: "already exists"},
		{name: "slot creation interrupted", f: Facts{Asked: true, Slot: "s", Rec: Record{Exists: true, Slot: "s"}, SlotFound: true}, want: Recreate},
		{name: "slot creation interrupted, no slot", f: Facts{Asked: true, Slot: "s", Rec: Record{Exists: true, Slot: "s"}}, want: Recreate},
		{name: "resume", f: Facts{Asked: true, Slot: "s", Rec: unfinished, SlotFound: true, SlotFlush: 0x1000}, want: Resume},
		{name: "resume, slot behind", f: Facts{Asked: true, Slot: "s", Rec: unfinished, SlotFound: true, SlotFlush: 0x800}, want: Resume},
		{name: "resume, other slot", f: Facts{Asked: true, Slot: "t", Rec: unfinished, SlotFound: true}, err: "--slot s"},
		{name: "resume, slot gone", f: Facts{Asked: true, Slot: "s", Rec: unfinished}, err: "no longer exists"},
		{name: "resume, slot consumed", f: Facts{Asked: true, Slot: "s", Rec: unfinished, SlotFound: true, SlotFlush: 0x1001}, err: "consumed"},
	} {
		got, err := Decide(tc.f)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || got != Nothing {
				t.Errorf("%s: Decide = %v, %v; want nothing and an error containing %q", tc.name, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: Decide = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}
