package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/rs/zerolog"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/state"
	"github.com/walapply/walapply/twophase"
)

// TestTranscripts feeds pgoutput messages through the applier (Handle, as
// the run loop does) onto a recording fake target, and compares what it
// sent, the commit marks and the outcomes with testdata/engine/*.txt. No
// PostgreSQL. Rewrite the expectations with
// `go test ./apply/internal/engine -run TestTranscripts -rewrite` (datadriven).
//
// Directives:
//
//	new [nocompaction] [nogroup] [twophase] [gid=source] [origin=LSN]
//	    [skip-lsn=LSN] [nogroup-through=LSN] [fail=N:SQLSTATE] [miss=N]
//	    [policy=kind:policy ...]
//	                  a fresh applier and target; origin is the origin's
//	                  progress on the target (default 0/0); fail and miss
//	                  make the target's Nth statement fail or change no row
//	restart [fail=N:SQLSTATE]
//	                  a new applier on the same target, from its origin,
//	                  as after a crash: prepared transactions stay
//	feed              the input's messages, one a line (below); the output
//	                  shows, under each message that did something, what
//	                  the target was sent and the outcome
//	state             the origin's progress as the applier sees it, and
//	                  the counts
//
// Messages (xids and LSNs as in the stream; a change inside a stream block
// names its (sub)transaction after @):
//
//	R 16384 public t d id:23:k v:25   Relation: relid, schema, name,
//	                                  identity d/f/n/i, columns name:type[:k]
//	B 501 0/110                       Begin xid, final LSN
//	C 0/110 0/118                     Commit: commit LSN, end LSN
//	O upstream                        Origin
//	I t t:1 t:a                       Insert into table t; values t:text,
//	                                  b:hex, n (NULL), u (unchanged TOAST)
//	U t N t:1 t:b | U t K t:1 N t:2 t:b | U t O ... N ...
//	D t K t:1 | D t O t:1 t:a
//	T t [u ...] [cascade] [restart]
//	I@502 t t:1                       a streamed change of (sub)xid 502
//	I*64 t t:$ t:a                    64 messages, $ counting from 1
//	I@502*64 t t:$                    ... of a streamed (sub)transaction
//	S 502 [first] / E / c 502 0/200 0/208 / A 502 503
//	b 601 gid 0/300 0/308             Begin Prepare (prepare LSN, end LSN)
//	P 601 gid 0/300 0/308             Prepare
//	p 601 gid 0/300 0/308             Stream Prepare
//	K 601 gid 0/400 0/408             Commit Prepared (commit LSN, end LSN)
//	r 601 gid 0/308 0/500             Rollback Prepared (prepare end, end)
//	idle                              Applier.Idle, as the loop calls it
//	                                  on a quiet stream
func TestTranscripts(t *testing.T) {
	datadriven.Walk(t, filepath.Join("testdata", "engine"), func(t *testing.T, path string) {
		e := &engineCase{t: t}
		datadriven.RunTest(t, path, e.run)
	})
}

// engineCase is one transcript file's state between directives.
type engineCase struct {
	t       *testing.T
	a       *Applier
	target  *fakeTarget
	dec     *protocol.Decoder
	rels    map[string]uint32
	spill   string
	opts    []datadriven.CmdArg // of new, for restart
	failed  bool                // the applier returned an error: it is discarded
	outcome Outcome             // of the last step
}

func (e *engineCase) run(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "new":
		e.target, e.opts, e.spill = newFakeTarget(), d.CmdArgs, filepath.Join(t.TempDir(), "spill")
		e.rels = map[string]uint32{}
		e.start(t, d.CmdArgs, 0)
		return ""
	case "restart":
		e.target.failAt = 0
		e.start(t, append(append([]datadriven.CmdArg(nil), e.opts...), d.CmdArgs...), e.target.origin)
		return fmt.Sprintf("from %s", e.target.origin)
	case "feed":
		var out strings.Builder
		for _, line := range strings.Split(d.Input, "\n") {
			if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			if e.failed {
				fmt.Fprintf(&out, "%s\n  (not fed: the applier failed)\n", line)
				continue
			}
			// "I*64 t t:$ t:a": 64 messages, $ counting from 1
			n, one := 1, line
			if op, rest, ok := strings.Cut(line, " "); ok && strings.Contains(op, "*") {
				op, count, _ := strings.Cut(op, "*")
				n, one = transcriptInt(t, count), op+" "+rest
			}
			var err error
			for i := 1; i <= n && err == nil; i++ {
				err = e.step(t, strings.ReplaceAll(one, "$", strconv.Itoa(i)))
			}
			e.report(&out, line, err)
			e.failed = err != nil
		}
		return out.String()
	case "state":
		applied, _ := e.a.Applied()
		st := &e.a.Stats
		return fmt.Sprintf("applied %s; txns applied %d, skipped %d; commits %d; inserts %d, updates %d, deletes %d, missing rows %d; prepared on the target %v\n",
			applied, st.TxnsApplied.Load(), st.TxnsSkipped.Load(), st.Commits.Load(), st.Inserts.Load(), st.Updates.Load(), st.Deletes.Load(),
			st.MissingRows.Load(), preparedGIDs(e.target.prepared))
	}
	t.Fatalf("unknown directive %q", d.Cmd)
	return ""
}

// step feeds one message (or idle) to the applier.
func (e *engineCase) step(t *testing.T, line string) error {
	var err error
	if line == "idle" {
		e.outcome, err = e.a.Idle(context.Background())
		return err
	}
	raw := e.encode(t, line)
	msg, derr := e.dec.Decode(raw)
	if derr != nil {
		t.Fatalf("%s: decoding: %v", line, derr)
	}
	e.a.stream.raw = raw
	_, e.outcome, err = e.a.Handle(context.Background(), msg)
	return err
}

// start makes a new applier on e.target from the origin's progress.
func (e *engineCase) start(t *testing.T, args []datadriven.CmdArg, origin protocol.LSN) {
	f := e.target
	st, _, err := OpenStreamState(state.OSFS, e.spill, "unit", "target")
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Name: "unit", Grouping: true, Compaction: true}
	gidMode := twophase.GIDModeApplier
	twoPhase := false
	var policies []string
	for _, arg := range args {
		val := ""
		if len(arg.Vals) > 0 {
			val = arg.Vals[0]
		}
		switch arg.Key {
		case "nocompaction":
			opts.Compaction = false
		case "nogroup":
			opts.Grouping = false
		case "twophase":
			twoPhase = true
		case "gid":
			gidMode = twophase.GIDModeSource
		case "origin":
			origin = transcriptLSN(t, val)
		case "skip-lsn":
			opts.SkipLSN = transcriptLSN(t, val)
		case "nogroup-through":
			opts.NoGroupThrough = transcriptLSN(t, val)
		case "fail":
			n, code, _ := strings.Cut(val, ":")
			f.failAt, f.failCode = f.executed+transcriptInt(t, n), code
		case "miss":
			f.missAt = f.executed + transcriptInt(t, val)
		case "policy":
			policies = append(policies, arg.Vals...)
		default:
			t.Fatalf("unknown argument %q", arg.Key)
		}
	}
	f.origin = origin
	e.failed = false
	a := New(zerolog.Nop(), f, opts, origin)
	a.tables = f.tables
	a.stream = st
	for _, p := range policies {
		kind, pol, ok := strings.Cut(p, ":")
		if !ok {
			t.Fatalf("policy %q: want kind:policy", p)
		}
		set, err := ParseConflictPolicies(kind + "=" + pol)
		if err != nil {
			t.Fatal(err)
		}
		a.policies[kind] = set[kind]
	}
	if twoPhase {
		setup, _ := f.Prepare(context.Background(), state.XactSetupUnlessPreparedSQL, nil)
		a.tp = twoPhaseState{on: true, mode: gidMode, name: opts.Name, dial: noDialer{}, setupUnless: setup, prepared: map[string]bool{}}
	}
	e.a = a
	if e.dec, err = protocol.NewDecoder(protocol.DecoderOptions{ProtoVersion: 4}); err != nil {
		t.Fatal(err)
	}
	f.take()
}

// report writes what a message (or step) did: the target's log, the
// outcome, an error.
func (e *engineCase) report(out *strings.Builder, line string, err error) {
	log := e.target.take()
	o := e.outcome
	oc := transcriptOutcome(o)
	if len(log) == 0 && oc == "" && err == nil {
		return
	}
	fmt.Fprintf(out, "%s\n", line)
	for _, l := range log {
		fmt.Fprintf(out, "  %s\n", l)
	}
	if oc != "" {
		fmt.Fprintf(out, "  outcome: %s\n", oc)
	}
	if err != nil {
		fmt.Fprintf(out, "  error: %v\n", err)
		kind := "permanent"
		if Transient(err) {
			kind = "transient"
		}
		var te *TxnError
		if errors.As(err, &te) && te.Grouped {
			kind += ", grouped (the retry applies it alone)"
		}
		fmt.Fprintf(out, "  (%s)\n", kind)
	}
}

func transcriptOutcome(o Outcome) string {
	var parts []string
	if o.Began {
		parts = append(parts, "began")
	}
	if o.Applied {
		parts = append(parts, "applied "+o.End.String())
		if o.Count > 1 {
			parts = append(parts, fmt.Sprintf("(%d txns)", o.Count))
		}
	}
	if o.Skipped {
		parts = append(parts, "skipped")
	}
	if o.Ended {
		parts = append(parts, "ended")
	}
	return strings.Join(parts, " ")
}

func preparedGIDs(m map[string]bool) []string {
	var ks []string
	for k, v := range m {
		if v {
			ks = append(ks, k)
		}
	}
	sort.Strings(ks)
	return ks
}
