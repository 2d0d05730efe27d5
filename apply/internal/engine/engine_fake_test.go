package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/apply/internal/pipeline"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/state"
	"github.com/walapply/walapply/twophase"
)

// fakeTarget is a recording target (applier_target.go) for the engine's
// tests: no PostgreSQL. It writes what the applier sends, batch by batch,
// into log: prepared statements, each statement with its parameters
// (decoded for reading), COPY data, commit marks, rollbacks and the
// origin's calls. Statements succeed, an UPDATE or DELETE changing the rows
// it should, unless failAt names the statement (counted from 1 over the
// fake's life) that fails with failCode, or missAt one that changes none.
//
// It differs from pipeline.Session in one way the applier cannot see:
// statementFor prepares at once even with a batch in flight.
type fakeTarget struct {
	pipeline.StmtQueue
	log []string

	seq      int      // prepared statements, named s1, s2, ...
	executed int      // statements executed so far
	lines    []string // the queue, rendered
	bytes    int
	flying   *fakeBatch
	prepared map[string]bool // GIDs prepared on the target, quoted
	origin   protocol.LSN    // the origin's progress, as the commits set it
	setup    protocol.LSN    // the origin advance set up in the open transaction

	failAt   int
	failCode string
	missAt   int

	tables *fakeCatalog

	// quiet: nothing is rendered or logged (TestAllocs); the queues are
	// reused as pipeline.Session reuses its own.
	quiet bool
	spare fakeBatch
	tags  map[int64]pgconn.CommandTag
}

type fakeBatch struct {
	queued []pipeline.Stmt
	keys   []byte
	lines  []string
	mark   *pipeline.CommitMark
}

func newFakeTarget() *fakeTarget {
	f := &fakeTarget{prepared: map[string]bool{}, tables: newFakeCatalog()}
	f.XactSetup = &pgconn.StatementDescription{Name: "origin_advance", SQL: state.XactSetupSQL}
	return f
}

func (f *fakeTarget) logf(format string, args ...any) {
	f.log = append(f.log, fmt.Sprintf(format, args...))
}

// take returns the log so far and starts a new one.
func (f *fakeTarget) take() []string {
	l := f.log
	f.log = nil
	return l
}

func (f *fakeTarget) Queue() *pipeline.StmtQueue { return &f.StmtQueue }

func (f *fakeTarget) Begin() {
	f.FirstLSN = f.TxnLSN
	f.QueueSQL(pipeline.OpBegin, nil, "BEGIN")
	f.QueueSQL(pipeline.OpBegin, nil, "SET CONSTRAINTS ALL IMMEDIATE")
}

func (f *fakeTarget) add(q pipeline.Stmt, line string) {
	f.Queued = append(f.Queued, q)
	if !f.quiet {
		f.lines = append(f.lines, line)
	}
}

func (f *fakeTarget) QueueSQL(op pipeline.Op, rel *relmap.Entry, sql string) {
	f.add(pipeline.Stmt{Op: op, Rel: rel, Xid: f.TxnXid, CommitLSN: f.TxnLSN, FirstLSN: f.FirstLSN}, sql)
	f.bytes += len(sql)
}

func (f *fakeTarget) QueueStmt(op pipeline.Op, rel *relmap.Entry, sd *pgconn.StatementDescription, params [][]byte, formats []int16, keyStart, keyEnd int) {
	line := ""
	if !f.quiet {
		line = sd.Name + fakeParams(params, formats)
	}
	f.add(pipeline.Stmt{Op: op, Rel: rel, SQL: sd.SQL, KeyStart: keyStart, KeyEnd: keyEnd, Xid: f.TxnXid, CommitLSN: f.TxnLSN, FirstLSN: f.FirstLSN}, line)
	for _, p := range params {
		f.bytes += len(p) + 8
	}
}

func (f *fakeTarget) QueueExec(q pipeline.Stmt, sql string, params [][]byte, oids []uint32, formats []int16) {
	f.add(q, sql+" "+fakeParams(params, formats))
}

func (f *fakeTarget) QueueCopy(rel *relmap.Entry, sql string, data []byte) {
	f.add(pipeline.Stmt{Op: pipeline.OpCopy, Rel: rel, Xid: f.TxnXid, CommitLSN: f.TxnLSN, FirstLSN: f.FirstLSN}, sql+"\n"+fakeCopyData(data))
	f.bytes += len(data)
}

func (f *fakeTarget) Full() bool {
	return len(f.Queued) >= pipeline.MaxBatchStatements || f.bytes >= pipeline.MaxBatchBytes
}

func (f *fakeTarget) Busy() bool { return f.flying != nil }

func (f *fakeTarget) send(mark *pipeline.CommitMark) {
	if f.quiet {
		spareQueued, spareKeys := f.spare.queued[:0], f.spare.keys[:0]
		f.spare = fakeBatch{queued: f.Queued, keys: f.Keys, mark: mark}
		f.flying = &f.spare
		f.Queued, f.Keys, f.bytes = spareQueued, spareKeys, 0
		return
	}
	b := &fakeBatch{queued: f.Queued, keys: f.Keys, lines: f.lines, mark: mark}
	f.logf("send")
	for _, l := range f.lines {
		f.logf("  %s", strings.ReplaceAll(l, "\n", "\n    "))
	}
	if mark != nil {
		f.logf("  (commits %s, %d txn)", mark.End, mark.Count)
	}
	f.flying = b
	f.Queued, f.Keys, f.lines, f.bytes = nil, nil, nil, 0
}

func (f *fakeTarget) SendAsync(ctx context.Context, mark *pipeline.CommitMark) (*pipeline.Stmt, error) {
	if q, err := f.Drain(ctx); err != nil {
		return q, err
	}
	if len(f.Queued) > 0 {
		f.send(mark)
	}
	return nil, nil
}

func (f *fakeTarget) Flush(ctx context.Context) (*pipeline.Stmt, error) {
	if q, err := f.Drain(ctx); err != nil {
		return q, err
	}
	if len(f.Queued) == 0 {
		return nil, nil
	}
	f.send(nil)
	return f.Drain(ctx)
}

// step executes one statement: the injected failure, a missing row, or
// success; it keeps the prepared GIDs and the origin up to date.
func (f *fakeTarget) step(sql string) (pgconn.CommandTag, error) {
	f.executed++
	if f.executed == f.failAt {
		return pgconn.CommandTag{}, &pgconn.PgError{Severity: "ERROR", Code: f.failCode, Message: "injected failure"}
	}
	ends := false
	switch {
	case strings.HasPrefix(sql, "origin_advance"):
		// origin_advance("0/118", ...) or origin_advance_unless_prepared
		if l, err := protocol.ParseLSN(strings.Trim(strings.SplitN(sql, "\"", 3)[1], `"`)); err == nil {
			f.setup = l
		}
	case strings.HasPrefix(sql, "PREPARE TRANSACTION "):
		f.prepared[strings.TrimPrefix(sql, "PREPARE TRANSACTION ")] = true
		ends = true
	case strings.HasPrefix(sql, "COMMIT PREPARED "), strings.HasPrefix(sql, "ROLLBACK PREPARED "):
		delete(f.prepared, sql[strings.Index(sql, "PREPARED ")+len("PREPARED "):])
		ends = true
	case sql == "COMMIT":
		ends = true
	}
	if ends && f.setup != 0 {
		f.origin, f.setup = f.setup, 0
	}
	return pgconn.CommandTag{}, nil
}

func (f *fakeTarget) Drain(ctx context.Context) (*pipeline.Stmt, error) {
	b := f.flying
	if b == nil {
		return nil, nil
	}
	f.flying = nil
	var o pipeline.BatchOutcome
	for i := range b.queued {
		q := &b.queued[i]
		if f.quiet {
			f.executed++
		} else if _, err := f.step(b.lines[i]); err != nil {
			o.Failed, o.Err = q, err
			break
		}
		rows := int64(max(q.Rows, 1))
		if f.executed == f.missAt {
			rows = 0
		}
		f.NoteResult(&o, q, b.keys, pipeline.Result{Tag: f.tag(rows)})
	}
	if o.Err != nil {
		f.logf("drain: statement %d (%s) failed: %v", f.executed, o.Failed.Op, o.Err)
		cp := *o.Failed
		return &cp, o.Err
	}
	if !f.quiet {
		f.logf("drain: ok")
	}
	if b.mark != nil {
		f.Done = append(f.Done, *b.mark)
	}
	return nil, nil
}

// tag is the command tag of a statement that changed rows rows.
func (f *fakeTarget) tag(rows int64) pgconn.CommandTag {
	t, ok := f.tags[rows]
	if !ok {
		if f.tags == nil {
			f.tags = map[int64]pgconn.CommandTag{}
		}
		t = pgconn.NewCommandTag("UPDATE " + strconv.FormatInt(rows, 10))
		f.tags[rows] = t
	}
	return t
}

func (f *fakeTarget) Rollback(ctx context.Context) error {
	f.Queued, f.Keys, f.lines, f.bytes, f.flying = f.Queued[:0], f.Keys[:0], nil, 0, nil
	f.setup = 0
	f.logf("ROLLBACK")
	return nil
}

func (f *fakeTarget) Broken(err error) bool { return false }
func (f *fakeTarget) Lost() bool            { return false }

func (f *fakeTarget) Prepare(ctx context.Context, sql string, paramOIDs []uint32) (*pgconn.StatementDescription, error) {
	f.seq++
	name := "s" + strconv.Itoa(f.seq)
	switch sql {
	case state.XactSetupSQL:
		name = "origin_advance"
	case state.XactSetupUnlessPreparedSQL:
		name = "origin_advance_unless_prepared"
	}
	f.logf("prepare %s: %s", name, sql)
	return &pgconn.StatementDescription{Name: name, SQL: sql, ParamOIDs: paramOIDs}, nil
}

func (f *fakeTarget) StatementFor(ctx context.Context, sql string, paramOIDs []uint32) (*pgconn.StatementDescription, error) {
	return f.Prepare(ctx, sql, paramOIDs)
}

func (f *fakeTarget) Exec(ctx context.Context, sql string) error {
	f.logf("exec %s", sql)
	if _, err := f.step(sql); err != nil {
		f.logf("  failed: %v", err)
		return err
	}
	return nil
}

func (f *fakeTarget) CopyFrom(ctx context.Context, r io.Reader, sql string) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	f.logf("copy %s\n    %s", sql, strings.ReplaceAll(fakeCopyData(data), "\n", "\n    "))
	_, err = f.step(sql)
	return err
}

func (f *fakeTarget) IsPrepared(ctx context.Context, gid string) (bool, error) {
	q := twophase.QuoteGID(gid)
	f.logf("is prepared %s: %v", q, f.prepared[q])
	return f.prepared[q], nil
}

func (f *fakeTarget) XactSetupIfPrepared(ctx context.Context, end protocol.LSN, at time.Time, gid string) (bool, error) {
	q := twophase.QuoteGID(gid)
	f.logf("origin advance to %s if %s is prepared: %v", end, q, f.prepared[q])
	if f.prepared[q] {
		f.setup = end
	}
	return f.prepared[q], nil
}

func (f *fakeTarget) XactReset(ctx context.Context) error {
	f.setup = 0
	f.logf("origin setup reset")
	return nil
}

func (f *fakeTarget) OriginName() string { return "pg_walapply" }

func (f *fakeTarget) RewindOrigin(ctx context.Context, to protocol.LSN) (protocol.LSN, error) {
	f.logf("origin rewound to %s", to)
	from := f.origin
	f.origin = to
	return from, nil
}

func (f *fakeTarget) Catalog() relmap.Catalog { return f.tables }

// noDialer is the transcript tests' dialer: there is no server to reach.
type noDialer struct{}

func (noDialer) Target(context.Context, string) (*pgx.Conn, error) {
	return nil, errors.New("no target in a transcript test")
}

func (noDialer) Source(context.Context, string) (*pgx.Conn, error) {
	return nil, errors.New("no source in a transcript test")
}
