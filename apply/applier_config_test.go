package apply

import (
	"reflect"
	"testing"
	"time"

	"github.com/walapply/walapply/apply/internal/engine"
)

// TestEngineConfigOf: each field of the applier's configuration comes from
// its Config field (the defaults' conflict policies included).
func TestEngineConfigOf(t *testing.T) {
	c := Config{Binary: true, NoGroupCommit: true, GroupMaxWait: 3 * time.Millisecond, NoCompaction: true,
		Name: "n", Conflicts: ConflictPolicies{ConflictInsertExists: PolicySkip}, SkipLSN: 0x200, noGroupThrough: 0x100}
	got := engineConfigOf(&c)
	want := engine.Options{Binary: true, NoGroupThrough: 0x100, GroupMaxWait: 3 * time.Millisecond, Name: "n",
		Policies: ConflictPolicies{ConflictInsertExists: PolicySkip}, SkipLSN: 0x200}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("engineConfigOf = %+v, want %+v", got, want)
	}
	c.NoGroupCommit, c.NoCompaction = false, false
	if got := engineConfigOf(&c); !got.Grouping || !got.Compaction {
		t.Errorf("grouping %v, compaction %v: want both on", got.Grouping, got.Compaction)
	}
}
