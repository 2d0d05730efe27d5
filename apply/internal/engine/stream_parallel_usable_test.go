package engine

import (
	"testing"

	"github.com/walapply/walapply/apply/internal/sqlgen"
)

// TestParallelUsable: a streamed transaction is applied as it streams
// unless it fell back before, --skip-lsn is armed, --ddl is on, or a table
// is being copied in the background (the decisions that need the commit
// LSN, which only Stream Commit brings). The initial copy's filter is the
// fifth case; its type lives with the initial copy and is left out here.
func TestParallelUsable(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(a *Applier, spilled map[uint32]bool)
		want bool
	}{
		{"nothing in the way", func(*Applier, map[uint32]bool) {}, true},
		{"another transaction fell back", func(_ *Applier, spilled map[uint32]bool) { spilled[8] = true }, true},
		{"it fell back before", func(_ *Applier, spilled map[uint32]bool) { spilled[7] = true }, false},
		{"--skip-lsn armed", func(a *Applier, _ map[uint32]bool) { a.skipLSN = 0x100 }, false},
		{"--ddl", func(a *Applier, _ map[uint32]bool) { a.ddl = &DDLState{} }, false},
		{"tables known, none being copied", func(a *Applier, _ map[uint32]bool) { a.watch = &TableWatch{} }, true},
		{"a table being copied", func(a *Applier, _ map[uint32]bool) {
			a.watch = &TableWatch{syncs: syncs{tables: map[sqlgen.Rel]*TableSync{{Schema: "public", Name: "t"}: nil}}}
		}, false},
	} {
		a, spilled := &Applier{}, map[uint32]bool{}
		a.stream.spillOnly = func(xid uint32) bool { return spilled[xid] }
		tc.set(a, spilled)
		if got := a.parallelUsable(7); got != tc.want {
			t.Errorf("%s: parallelUsable = %v, want %v", tc.name, got, tc.want)
		}
	}
}
