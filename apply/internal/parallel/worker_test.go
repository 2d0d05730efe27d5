package parallel

import (
	"context"
	"strconv"
	"strings"
	"testing"
)

// TestWorker feeds a worker, through the run loop's calls, the stream
// blocks of one transaction and compares what it queued on its target
// (fakeApplier): the net state written out before a savepoint, a
// subtransaction's abort rolled back to its savepoint, runs of inserts
// past MinRun sent by COPY and ended by whatever else comes (but not by
// the end of a block), the relations and values COPY cannot take, and a
// failed change that leaves only the rollback.
//
// An op is "<subxid> <message>" (the fake's notation: a change of that
// subtransaction, 7 being the transaction itself), "idle" (end of block),
// "abort <subxid>", "commit", "prepare <gid>" or "rollback".
func TestWorker(t *testing.T) {
	for _, tc := range []struct {
		name    string
		noCopy  bool
		failOn  string
		ops     []string
		want    []string
		wantErr string
	}{{
		name: "small transaction",
		ops:  []string{"7 I 1 a x", "7 U 1 a y", "idle", "commit"},
		want: []string{"begin 7", "change I 1 a x", "change U 1 a y", "write out",
			"end at 0/100, applied 0/50", "commit, origin at 0/108"},
	}, {
		name: "savepoints",
		ops: []string{"7 I 1 a x", "8 I 1 b x", "9 I 1 c x", "idle", "abort 8",
			"9 I 1 d x", "abort 5", "commit"},
		want: []string{"begin 7", "change I 1 a x",
			"write out", `sql SAVEPOINT "walapply_8"`, "change I 1 b x",
			"write out", `sql SAVEPOINT "walapply_9"`, "change I 1 c x",
			"write out", // idle
			// 9 is nested in 8: rolled back with it, so its next change
			// defines its savepoint anew; 5 had no change here.
			"discard", `sql ROLLBACK TO SAVEPOINT "walapply_8"`,
			`sql SAVEPOINT "walapply_9"`, "change I 1 d x",
			"end at 0/100, applied 0/50", "write out", "commit, origin at 0/108"},
	}, {
		name: "copy run ended by an update",
		ops:  []string{"7 I 1 1 x", "7 I 1 2 x", "7 I 1 3 x", "7 I 1 4 x", "7 U 1 1 y", "commit"},
		want: []string{"begin 7", "change I 1 1 x", "change I 1 2 x", "write out",
			`copy COPY t1 ("id", "v") FROM STDIN: 2 rows "3\tx\n4\tx\n"`, "change U 1 1 y",
			"end at 0/100, applied 0/50", "write out", "commit, origin at 0/108"},
	}, {
		name: "copy run across blocks, ended by the commit",
		ops:  []string{"7 I 1 1 x", "7 I 1 2 x", "7 I 1 3 x", "idle", "7 I 1 4 x", "idle", "commit"},
		want: []string{"begin 7", "change I 1 1 x", "change I 1 2 x", "write out",
			"end at 0/100, applied 0/50", `copy COPY t1 ("id", "v") FROM STDIN: 2 rows "3\tx\n4\tx\n"`,
			"commit, origin at 0/108"},
	}, {
		name: "copy run ended by another relation and by a Relation message",
		ops:  []string{"7 I 1 1 x", "7 I 1 2 x", "7 I 1 3 x", "7 I 2 1 x", "7 I 2 2 x", "7 I 2 3 x", "7 R 2", "7 R 1", "commit"},
		want: []string{"begin 7", "change I 1 1 x", "change I 1 2 x", "write out",
			`copy COPY t1 ("id", "v") FROM STDIN: 1 rows "3\tx\n"`, "change I 2 1 x", "change I 2 2 x",
			"write out", `copy COPY t2 ("id", "v") FROM STDIN: 1 rows "3\tx\n"`, "relation 2",
			"relation 1", "end at 0/100, applied 0/50", "commit, origin at 0/108"},
	}, {
		name: "a Relation message of a table the net state holds writes it out",
		ops:  []string{"7 U 3 1 x", "7 R 3", "7 U 3 1 y", "commit"},
		want: []string{"begin 7", "change U 3 1 x", "write out", "relation 3", "change U 3 1 y",
			"end at 0/100, applied 0/50", "write out", "commit, origin at 0/108"},
	}, {
		name:   "inserts may not copy (a value check, an insert_exists policy)",
		noCopy: true,
		ops:    []string{"7 I 1 1 x", "7 I 1 2 x", "7 I 1 3 x", "7 I 1 4 x", "commit"},
		want: []string{"begin 7", "change I 1 1 x", "change I 1 2 x", "change I 1 3 x", "change I 1 4 x",
			"end at 0/100, applied 0/50", "write out", "commit, origin at 0/108"},
	}, {
		name: "a table with row security keeps INSERT",
		ops:  []string{"7 I 9 1 x", "7 I 9 2 x", "7 I 9 3 x", "7 I 9 4 x", "commit"},
		want: []string{"begin 7", "change I 9 1 x", "change I 9 2 x", "change I 9 3 x", "change I 9 4 x",
			"end at 0/100, applied 0/50", "write out", "commit, origin at 0/108"},
	}, {
		name: "binary run, ended by a row mixing text and binary",
		ops:  []string{"7 I 1 b:1 b:x", "7 I 1 b:2 b:x", "7 I 1 b:3 b:x", "7 I 1 b:4 b:x", "7 I 1 b:5 x", "commit"},
		want: []string{"begin 7", "change I 1 b:1 b:x", "change I 1 b:2 b:x", "write out",
			// header 19, two rows of 2+5+5, trailer 2
			`copy COPY t1 ("id", "v") FROM STDIN (FORMAT binary): 2 rows, 45 bytes`, "change I 1 b:5 x",
			"end at 0/100, applied 0/50", "write out", "commit, origin at 0/108"},
	}, {
		name: "prepare",
		ops:  []string{"7 I 1 a x", "prepare g1"},
		want: []string{"begin 7", "change I 1 a x", "end at 0/100, applied 0/50", "write out", "prepare g1, origin at 0/108"},
	}, {
		name: "rollback",
		ops:  []string{"7 I 1 a x", "8 I 1 b x", "rollback"},
		want: []string{"begin 7", "change I 1 a x", "write out", `sql SAVEPOINT "walapply_8"`, "change I 1 b x", "rollback"},
	}, {
		name:    "a failed change: the rest is dropped, the commit fails and rolls back",
		failOn:  "I 1 b",
		ops:     []string{"7 I 1 a x", "7 I 1 b x", "7 I 1 c x", "idle", "commit"},
		want:    []string{"begin 7", "change I 1 a x", "change I 1 b x: fails", "reset", "rollback"},
		wantErr: "fake: duplicate key",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			d := &fakeDialer{setup: func(f *fakeApplier) { f.noCopy, f.failOn = tc.noCopy, tc.failOn }}
			p := New(Options{Size: 1, MinRun: 2, Dial: d}, nil)
			ctx := context.Background()
			w, err := p.Take(ctx, 7)
			if w == nil || err != nil {
				t.Fatalf("Take: %v, %v", w, err)
			}
			var gotErr error
			for _, op := range tc.ops {
				verb, arg, _ := strings.Cut(op, " ")
				switch verb {
				case "idle":
					w.Idle()
				case "abort":
					sub, _ := strconv.ParseUint(arg, 10, 32)
					w.AbortSub(uint32(sub))
				case "commit":
					gotErr = w.Commit(0x100, 0x108, 0, 0x50)
				case "prepare":
					gotErr = w.Prepare(0x100, 0x108, 0, arg, 0x50)
				case "rollback":
					w.Rollback()
				default:
					sub, err := strconv.ParseUint(verb, 10, 32)
					if err != nil {
						t.Fatalf("op %q", op)
					}
					w.Add([]byte(arg), uint32(sub))
				}
			}
			p.Close()
			if got := errString(gotErr); got != tc.wantErr {
				t.Errorf("end of the transaction: %q, want %q", got, tc.wantErr)
			}
			got := d.apps[0].take()
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("queued:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
			if !d.apps[0].closed {
				t.Error("the worker's connection was not closed")
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
