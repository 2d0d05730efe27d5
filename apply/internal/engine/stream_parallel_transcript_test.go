package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/walapply/walapply/apply/internal/parallel"
	"github.com/walapply/walapply/apply/internal/pipeline"
)

// TestParallelTranscripts runs testdata/parallel/*.txt as TestTranscripts
// runs its files, with --streaming parallel: the run loop's side of it
// (which transactions a worker takes, the main connection's group
// committed before a block goes to a worker, the applier's origin
// following a worker's commit or prepare, an already applied transaction
// rolled back, a worker's failure ending the session for the spill path)
// against the engine's recording fake, each worker's applier on a
// recording fake target of its own. No PostgreSQL.
//
// Directives besides TestTranscripts':
//
//	parallel [workers=N] [fail=N:SQLSTATE] [nodial]
//	                  a pool on the applier (N workers, default 2); fail
//	                  makes the Nth statement of worker 1's target fail;
//	                  nodial makes every worker's connection fail
//	workers           what each worker's target was sent since the last
//	                  time (heldTarget: all at the commit or prepare);
//	                  only where the workers are done, after a Stream
//	                  Commit or Prepare
//
// A transcript declares its tables before the first worker starts (the
// workers read the fake catalog from their goroutines).
func TestParallelTranscripts(t *testing.T) {
	datadriven.Walk(t, filepath.Join("testdata", "parallel"), func(t *testing.T, path string) {
		e := &parallelCase{engineCase: engineCase{t: t}}
		defer e.closePool()
		datadriven.RunTest(t, path, e.run)
	})
}

// parallelCase is an engineCase with a pool of workers on fake targets.
type parallelCase struct {
	engineCase
	dial *fakeParallelDialer
}

func (e *parallelCase) run(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "new", "restart":
		e.closePool()
	case "parallel":
		e.closePool()
		e.dial = &fakeParallelDialer{e: &e.engineCase}
		size := 2
		for _, arg := range d.CmdArgs {
			val := ""
			if len(arg.Vals) > 0 {
				val = arg.Vals[0]
			}
			switch arg.Key {
			case "workers":
				size = transcriptInt(t, val)
			case "fail":
				n, code, _ := strings.Cut(val, ":")
				e.dial.failAt, e.dial.failCode = transcriptInt(t, n), code
			case "nodial":
				e.dial.refuse = true
			default:
				t.Fatalf("unknown argument %q", arg.Key)
			}
		}
		e.a.SetParallel(parallel.New(parallel.Options{Size: size, MinRun: CopyMinRun, Dial: e.dial}, nil),
			func(uint32) bool { return false }, nil)
		return ""
	case "workers":
		var out strings.Builder
		for i, f := range e.dial.targets {
			fmt.Fprintf(&out, "worker %d\n", i+1)
			for _, l := range f.take() {
				fmt.Fprintf(&out, "  %s\n", l)
			}
		}
		return out.String()
	}
	return e.engineCase.run(t, d)
}

// closePool ends the workers, if a pool is on.
func (e *parallelCase) closePool() {
	if e.a != nil && e.a.stream.par != nil {
		e.a.stream.par.Close()
		e.a.stream.par = nil
	}
}

// fakeParallelDialer gives each worker an applier like the real one's
// (NewWorkerApplier) on a fake target of its own, sharing the main
// target's catalog and prepared transactions.
type fakeParallelDialer struct {
	e        *engineCase
	targets  []*fakeTarget
	failAt   int // of worker 1's target
	failCode string
	refuse   bool
}

func (d *fakeParallelDialer) Worker(ctx context.Context, id int) (parallel.Applier, error) {
	if d.refuse {
		return nil, errors.New("connection refused")
	}
	f := newFakeTarget()
	// One server: the same tables, the same prepared transactions.
	f.tables, f.prepared = d.e.target.tables, d.e.target.prepared
	if id == 1 {
		f.failAt, f.failCode = d.failAt, d.failCode
	}
	d.targets = append(d.targets, f)
	return NewWorkerApplier(d.e.a, id, heldTarget{f}, fakeWorkerConn{})
}

// heldTarget is a worker's fake target that sends only at a Flush (the
// commit or prepare): SendAsync, which the worker calls whenever its queue
// of jobs runs dry, does nothing, so that what the target is sent, and
// when a failure shows, do not depend on how the worker's goroutine and
// the test interleave.
type heldTarget struct{ *fakeTarget }

func (heldTarget) SendAsync(ctx context.Context, mark *pipeline.CommitMark) (*pipeline.Stmt, error) {
	return nil, nil
}

// fakeWorkerConn is a worker's connection to nowhere.
type fakeWorkerConn struct{}

func (fakeWorkerConn) PID() uint32                      { return 0 }
func (fakeWorkerConn) Cancel(ctx context.Context) error { return nil }
func (fakeWorkerConn) Close(ctx context.Context)        {}
func (fakeWorkerConn) Reset()                           {}
