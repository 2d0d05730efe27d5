package protocol

import (
	"errors"
	"slices"
	"testing"
)

func TestParseTimelineHistory(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []TimelineSwitch
		bad      bool
	}{
		{name: "empty", in: "", want: nil},
		{name: "one promotion", in: "1\t0/14F0130\tno recovery target specified\n",
			want: []TimelineSwitch{{1, 0x14F0130}}},
		{name: "three", in: "1\t0/3000000\tno recovery target specified\n\n2\t0/50000A8\tbefore 2026-12-01 10:00:00+00\n3\t1/0\tat restore point \"x\"\n",
			want: []TimelineSwitch{{1, 0x3000000}, {2, 0x50000A8}, {3, 1 << 32}}},
		{name: "comments and spaces", in: "# a comment\n   1   0/10 reason with spaces  \n#2 0/20\n",
			want: []TimelineSwitch{{1, 0x10}}},
		{name: "no reason", in: "1 0/10", want: []TimelineSwitch{{1, 0x10}}},
		{name: "no switch point", in: "1\n", bad: true},
		{name: "bad timeline", in: "x\t0/10\n", bad: true},
		{name: "timeline zero", in: "0\t0/10\n", bad: true},
		{name: "bad lsn", in: "1\t0-10\n", bad: true},
		{name: "timelines not increasing", in: "2\t0/10\n2\t0/20\n", bad: true},
		{name: "switch points going back", in: "1\t0/20\n2\t0/10\n", bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseTimelineHistory([]byte(tc.in))
			if tc.bad {
				if !errors.Is(err, ErrTimelineHistory) {
					t.Fatalf("want ErrTimelineHistory, got %v (%v)", err, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}
