package apply

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/state"
)

func TestPlanCopy(t *testing.T) {
	unfinished := copyRecord{exists: true, slot: "s", point: 0x1000}
	for _, tc := range []struct {
		name string
		f    copyFacts
		want copyAction
		err  string
	}{
		{name: "no copy asked, none recorded", f: copyFacts{}, want: copyNothing},
		{name: "finished copy, not asked", f: copyFacts{rec: copyRecord{exists: true, finished: true}}, want: copyNothing},
		{name: "finished copy, asked again", f: copyFacts{asked: true, slot: "s", rec: copyRecord{exists: true, slot: "s", finished: true}, slotFound: true, origin: 0x2000}, want: copyNothing},
		{name: "unfinished copy, not asked", f: copyFacts{rec: unfinished}, err: "run again with --copy"},
		{name: "fresh", f: copyFacts{asked: true, slot: "s"}, want: copyFresh},
		{name: "fresh, origin has progress", f: copyFacts{asked: true, slot: "s", origin: 0x10}, err: "already replicates"},
		{name: "fresh, slot exists", f: copyFacts{asked: true, slot: "s", slotFound: true}, err: "already exists"},
		{name: "slot creation interrupted", f: copyFacts{asked: true, slot: "s", rec: copyRecord{exists: true, slot: "s"}, slotFound: true}, want: copyRecreate},
		{name: "slot creation interrupted, no slot", f: copyFacts{asked: true, slot: "s", rec: copyRecord{exists: true, slot: "s"}}, want: copyRecreate},
		{name: "resume", f: copyFacts{asked: true, slot: "s", rec: unfinished, slotFound: true, slotFlush: 0x1000}, want: copyResume},
		{name: "resume, slot behind", f: copyFacts{asked: true, slot: "s", rec: unfinished, slotFound: true, slotFlush: 0x800}, want: copyResume},
		{name: "resume, other slot", f: copyFacts{asked: true, slot: "t", rec: unfinished, slotFound: true}, err: "--slot s"},
		{name: "resume, slot gone", f: copyFacts{asked: true, slot: "s", rec: unfinished}, err: "no longer exists"},
		{name: "resume, slot consumed", f: copyFacts{asked: true, slot: "s", rec: unfinished, slotFound: true, slotFlush: 0x1001}, err: "consumed"},
	} {
		got, err := planCopy(tc.f)
		if tc.err != "" {
			var perm *PermanentError
			if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.As(err, &perm) {
				t.Errorf("%s: planCopy = %v, %v; want a permanent error containing %q", tc.name, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: planCopy = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

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

func TestCopyTableSQL(t *testing.T) {
	tbl := &copyTable{relName: relName{`my "schema"`, "t"}, copyCols: []string{"id", `we"ird`}, filter: "(id > 10)"}
	if got, want := tbl.copyOutSQL(""), `COPY (SELECT "id", "we""ird" FROM ONLY "my ""schema"""."t" WHERE (id > 10)) TO STDOUT`; got != want {
		t.Errorf("copyOutSQL = %s\nwant %s", got, want)
	}
	tbl.partitioned, tbl.filter = true, ""
	if got, want := tbl.copyOutSQL(""), `COPY (SELECT "id", "we""ird" FROM "my ""schema"""."t") TO STDOUT`; got != want {
		t.Errorf("copyOutSQL = %s\nwant %s", got, want)
	}
	if got, want := tbl.copyInSQL(), `COPY "my ""schema"""."t" ("id", "we""ird") FROM STDIN`; got != want {
		t.Errorf("copyInSQL = %s\nwant %s", got, want)
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

func TestCopyOriginName(t *testing.T) {
	if got := copyOriginName("bench", 2); got != "walapply_copy2_bench" {
		t.Errorf("copyOriginName = %q", got)
	}
	// Long names: within the limit, valid UTF-8, and distinct for names
	// that share their beginning.
	a := copyOriginName(strings.Repeat("é", 40)+"a", 1)
	b := copyOriginName(strings.Repeat("é", 40)+"b", 1)
	for _, n := range []string{a, b} {
		if len(n) > state.MaxOriginNameLen || !utf8.ValidString(n) || !strings.HasPrefix(n, "walapply_copy1_") {
			t.Errorf("copyOriginName of a long name = %q (%d bytes)", n, len(n))
		}
	}
	if a == b {
		t.Errorf("two long names share the origin name %q", a)
	}
}

func TestIsCopyOriginOf(t *testing.T) {
	long := strings.Repeat("é", 40) + "a"
	for _, tc := range []struct {
		applier, origin string
		want            bool
	}{
		{"app", "walapply_copy1_app", true},
		{"app", "walapply_copy17_app", true},
		{"app", "walapply_copy1_app_x", false}, // applier app_x's
		{"app_x", "walapply_copy1_app_x", true},
		{"app", "walapply_copy01_app", false},
		{"app", "walapply_copy0_app", false},
		{"app", "walapply_app", false},
		{"app", "walapply_copy_app", false},
		{long, copyOriginName(long, 3), true},
		{long, copyOriginName(strings.Repeat("é", 40)+"b", 3), false},
	} {
		if got := isCopyOriginOf(tc.applier, tc.origin); got != tc.want {
			t.Errorf("isCopyOriginOf(%q, %q) = %v, want %v", tc.applier, tc.origin, got, tc.want)
		}
		// The parallel streaming workers' origins follow the same rule
		// under their own prefix, and are not copy workers' origins.
		par := strings.Replace(tc.origin, copyOriginPrefix, parallelOriginPrefix, 1)
		if tc.origin == copyOriginName(tc.applier, 3) {
			par = parallelOriginName(tc.applier, 3)
		}
		if got := isParallelOriginOf(tc.applier, par); got != tc.want {
			t.Errorf("isParallelOriginOf(%q, %q) = %v, want %v", tc.applier, par, got, tc.want)
		}
		if tc.want && isParallelOriginOf(tc.applier, tc.origin) {
			t.Errorf("isParallelOriginOf(%q, %q): a copy worker's origin taken for a parallel worker's", tc.applier, tc.origin)
		}
	}
}
