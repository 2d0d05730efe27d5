package apply

import (
	"errors"
	"strings"
	"testing"

	"github.com/walapply/walapply/apply/internal/initcopy"
	"github.com/walapply/walapply/protocol"
)

func TestTempSlotName(t *testing.T) {
	if got := tempSlotName("bench", 4242); got != "bench_copy_4242" {
		t.Errorf("tempSlotName = %q", got)
	}
	long := strings.Repeat("x", 63)
	got := tempSlotName(long, 4194304)
	if err := protocol.ValidateSlotName(got); err != nil || !strings.HasSuffix(got, "_copy_4194304") {
		t.Errorf("tempSlotName(63 x's) = %q, %v", got, err)
	}
}

func TestCopyCheckErrorMessage(t *testing.T) {
	e := &CopyCheckError{
		MissingTables:  []string{`"public"."a"`, `"public"."b"`},
		MissingColumns: map[string][]string{`"public"."d"`: {`"x"`, `"y"`}},
		NotEmpty:       []string{`"public"."c"`},
	}
	msg := e.Error()
	for _, want := range []string{`2 published table(s) missing on the target: "public"."a", "public"."b"`, `"public"."d" lacks "x", "y"`, `1 target table(s) not empty: "public"."c"`, "TRUNCATE"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
}

// TestPlanCopyPermanent: every refusal of initcopy.Decide leaves planCopy
// as a PermanentError with its text; a decision is no error.
func TestPlanCopyPermanent(t *testing.T) {
	act, err := planCopy(initcopy.Facts{Asked: true, Slot: "s", SlotFound: true})
	var perm *PermanentError
	if !errors.As(err, &perm) || !strings.Contains(err.Error(), "already exists") || act != initcopy.Nothing {
		t.Errorf("slot exists: planCopy = %v, %v; want a permanent error", act, err)
	}
	if act, err := planCopy(initcopy.Facts{Asked: true, Slot: "s"}); err != nil || act != initcopy.Fresh {
		t.Errorf("fresh: planCopy = %v, %v", act, err)
	}
}

// TestCopyCheckErrorOfProblems: the package's problems convert to the
// public error field by field.
func TestCopyCheckErrorOfProblems(t *testing.T) {
	p := &initcopy.Problems{MissingTables: []string{"a"}, MissingColumns: map[string][]string{"b": {"x"}}, NotEmpty: []string{"c"}, NoColumns: []string{"d"}}
	e := (*CopyCheckError)(p)
	if e.MissingTables[0] != "a" || e.MissingColumns["b"][0] != "x" || e.NotEmpty[0] != "c" || e.NoColumns[0] != "d" {
		t.Errorf("converted: %+v", e)
	}
}

// TestWorkerOriginsApart: the parallel streaming workers' origins follow
// the copy workers' rule under their own prefix, and neither is taken for
// the other.
func TestWorkerOriginsApart(t *testing.T) {
	long := strings.Repeat("é", 40) + "a"
	for _, applier := range []string{"app", "app_x", long} {
		cp, par := initcopy.OriginName(applier, 3), parallelOriginName(applier, 3)
		if !isParallelOriginOf(applier, par) || !initcopy.IsOriginOf(applier, cp) {
			t.Errorf("%q: %q or %q not recognised as its own", applier, cp, par)
		}
		if isParallelOriginOf(applier, cp) || initcopy.IsOriginOf(applier, par) {
			t.Errorf("%q: a copy worker's origin %q and a parallel worker's %q taken for each other", applier, cp, par)
		}
		if got := strings.Replace(cp, initcopy.OriginPrefix, parallelOriginPrefix, 1); len(applier) < 20 && got != par {
			t.Errorf("%q: parallel origin %q, want the copy's rule under its prefix: %q", applier, par, got)
		}
	}
}
