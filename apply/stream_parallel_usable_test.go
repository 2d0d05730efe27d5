package apply

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
		set  func(a *applier, cfg *Config)
		want bool
	}{
		{"nothing in the way", func(*applier, *Config) {}, true},
		{"another transaction fell back", func(_ *applier, cfg *Config) { cfg.spillXids = map[uint32]bool{8: true} }, true},
		{"it fell back before", func(_ *applier, cfg *Config) { cfg.spillXids = map[uint32]bool{7: true} }, false},
		{"--skip-lsn armed", func(a *applier, _ *Config) { a.skipLSN = 0x100 }, false},
		{"--ddl", func(a *applier, _ *Config) { a.ddl = &ddlState{} }, false},
		{"tables known, none being copied", func(a *applier, _ *Config) { a.watch = &tableWatch{} }, true},
		{"a table being copied", func(a *applier, _ *Config) {
			a.watch = &tableWatch{syncs: syncs{tables: map[sqlgen.Rel]*tableSync{{Schema: "public", Name: "t"}: nil}}}
		}, false},
	} {
		a, cfg := &applier{}, &Config{}
		tc.set(a, cfg)
		if got := a.parallelUsable(cfg, 7); got != tc.want {
			t.Errorf("%s: parallelUsable = %v, want %v", tc.name, got, tc.want)
		}
	}
}
