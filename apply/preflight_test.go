package apply

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/walapply/walapply/protocol"
)

// TestPreflightChecks: the checks that decide from the facts alone, and
// how their problems are reported together.
func TestPreflightChecks(t *testing.T) {
	s := &session{cfg: &Config{Slot: "s", Publications: []string{"pub"}}}
	facts := func() *preflightFacts {
		return &preflightFacts{version: 150000, sys: protocol.SystemInfo{DBName: "db"}, walLevel: "logical", freeSlots: 1, pubs: []string{"pub"},
			slot: protocol.SlotStatus{Name: "s", SlotType: "logical", Plugin: "pgoutput", Database: "db"}, slotFound: true}
	}
	cases := []struct {
		name   string
		change func(*Config, *preflightFacts)
		check  preflightCheck
		want   string // "" for no problem
	}{
		{"wal_level logical", nil, checkWALLevel, ""},
		{"wal_level replica", func(_ *Config, f *preflightFacts) { f.walLevel = "replica" }, checkWALLevel, "wal_level = replica"},
		{"publication present", nil, checkPublications, ""},
		{"publications missing", func(c *Config, _ *preflightFacts) { c.Publications = []string{"pub", "a", "b"} },
			checkPublications, `publications "a", "b" do not exist in source database "db", which has "pub"`},
		{"no publication at all", func(_ *Config, f *preflightFacts) { f.pubs = nil }, checkPublications, `publication "pub" does not exist in source database "db", which has no publication`},
		{"slot fine", nil, checkSlot, ""},
		{"slot missing", func(_ *Config, f *preflightFacts) { f.slotFound = false }, checkSlot, "--create-slot"},
		{"slot created", func(c *Config, f *preflightFacts) { c.CreateSlot = true; f.slotFound = false }, checkSlot, ""},
		{"no free slot", func(c *Config, f *preflightFacts) { c.CreateSlot = true; f.slotFound = false; f.freeSlots = 0 }, checkSlot, "max_replication_slots"},
		{"wrong plugin", func(_ *Config, f *preflightFacts) { f.slot.Plugin = "test_decoding" }, checkSlot, `uses plugin "test_decoding"`},
		{"other database", func(_ *Config, f *preflightFacts) { f.slot.Database = "other" }, checkSlot, `belongs to database "other"`},
		{"two-phase slot", func(_ *Config, f *preflightFacts) { f.slot.TwoPhase = true }, checkSlot, "--two-phase"},
		{"origin none on 15", func(c *Config, _ *preflightFacts) { c.Origin = OriginNone }, checkSourceOptions, "PostgreSQL 16 or later"},
		{"parallel streaming on 15", func(c *Config, _ *preflightFacts) { c.Streaming = "parallel" }, checkSourceOptions, "--streaming parallel"},
	}
	for _, c := range cases {
		cfg := *s.cfg
		f := facts()
		if c.change != nil {
			c.change(&cfg, f)
		}
		problems, err := c.check(context.Background(), &session{cfg: &cfg}, f)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		switch {
		case c.want == "" && len(problems) > 0:
			t.Errorf("%s: problems %v, want none", c.name, problems)
		case c.want != "" && (len(problems) != 1 || !strings.Contains(problems[0].Error(), c.want)):
			t.Errorf("%s: problems %v, want one saying %q", c.name, problems, c.want)
		}
	}

	one := errors.New("one")
	e := &PreflightError{Problems: []error{one, errors.New("two")}}
	if got := e.Error(); !strings.Contains(got, "2 problems") || !strings.Contains(got, "(1) one; (2) two") {
		t.Errorf("PreflightError: %q", got)
	}
	if !errors.Is(&PermanentError{Err: e}, one) || IsTransient(&PermanentError{Err: e}) {
		t.Error("a preflight problem is not found by errors.Is, or is transient")
	}
}
