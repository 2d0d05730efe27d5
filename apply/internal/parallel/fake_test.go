package parallel

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/walapply/walapply/apply/internal/pipeline"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/protocol"
)

// fakeApplier is a recording Applier: it writes down, one line each, what
// a worker queues on its target (changes, write-outs, statements, COPYs,
// the end of the transaction), not when it sends (that depends on how the
// worker's goroutine and the run loop interleave).
//
// Messages are in a notation of this test's own, decoded by Decode:
// "I <rel> <v>..." an insert, "U <rel> <v>..." an update, "D <rel> <v>" a
// delete, "R <rel>" a Relation message; a value "b:<v>" is binary, every
// other text. Every relation has two columns.
type fakeApplier struct {
	pid uint32
	// failOn makes Change fail on the message that starts with it.
	failOn string
	// noCopy: MayCopy says no. Relation 9 has row security.
	noCopy bool

	mu     sync.Mutex
	calls  []string
	net    map[uint32]bool // the relations the net state holds
	closed bool
}

func (f *fakeApplier) rec(format string, args ...any) {
	f.mu.Lock()
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
	f.mu.Unlock()
}

// take returns the calls recorded so far and forgets them.
func (f *fakeApplier) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

func (f *fakeApplier) Begin(xid uint32) {
	f.net = map[uint32]bool{}
	f.rec("begin %d", xid)
}

func (f *fakeApplier) Decode(raw []byte) (protocol.Message, error) {
	fields := strings.Fields(string(raw))
	if len(fields) < 2 {
		return nil, fmt.Errorf("fake: cannot decode %q", raw)
	}
	rel, err := strconv.ParseUint(fields[1], 10, 32)
	if err != nil {
		return nil, err
	}
	var t protocol.TupleData
	for _, v := range fields[2:] {
		c := protocol.TupleColumn{Kind: protocol.ColumnText, Data: []byte(v)}
		if b, ok := strings.CutPrefix(v, "b:"); ok {
			c = protocol.TupleColumn{Kind: protocol.ColumnBinary, Data: []byte(b)}
		}
		t.Columns = append(t.Columns, c)
	}
	id := uint32(rel)
	switch fields[0] {
	case "I":
		return &protocol.Insert{RelationID: id, New: t}, nil
	case "U":
		return &protocol.Update{RelationID: id, New: t}, nil
	case "D":
		return &protocol.Delete{RelationID: id, OldKind: protocol.TupleOldKey, Old: t}, nil
	case "R":
		return &protocol.Relation{RelationID: id}, nil
	}
	return nil, fmt.Errorf("fake: cannot decode %q", raw)
}

func (f *fakeApplier) PutRelation(m *protocol.Relation) { f.rec("relation %d", m.RelationID) }
func (f *fakeApplier) PutType(m *protocol.TypeMessage)  { f.rec("type %d", m.TypeOID) }
func (f *fakeApplier) Holds(rel uint32) bool            { return f.net[rel] }

func (f *fakeApplier) Change(ctx context.Context, msg protocol.Message) error {
	var line string
	switch m := msg.(type) {
	case *protocol.Insert:
		line, f.net[m.RelationID] = "I "+tuple(m.RelationID, &m.New), true
	case *protocol.Update:
		line, f.net[m.RelationID] = "U "+tuple(m.RelationID, &m.New), true
	case *protocol.Delete:
		line, f.net[m.RelationID] = "D "+tuple(m.RelationID, &m.Old), true
	}
	if f.failOn != "" && strings.HasPrefix(line, f.failOn) {
		f.rec("change %s: fails", line)
		return errors.New("fake: duplicate key")
	}
	f.rec("change %s", line)
	return nil
}

// tuple renders a tuple as the notation has it.
func tuple(rel uint32, t *protocol.TupleData) string {
	s := strconv.FormatUint(uint64(rel), 10)
	for _, c := range t.Columns {
		if c.Kind == protocol.ColumnBinary {
			s += " b:" + string(c.Data)
		} else {
			s += " " + string(c.Data)
		}
	}
	return s
}

func (f *fakeApplier) WriteOut(ctx context.Context) error {
	if len(f.net) > 0 {
		f.rec("write out")
		f.net = map[uint32]bool{}
	}
	return nil
}

func (f *fakeApplier) Discard() {
	f.net = map[uint32]bool{}
	f.rec("discard")
}

func (f *fakeApplier) QueueSQL(op pipeline.Op, sql string) { f.rec("sql %s", sql) }
func (f *fakeApplier) Full() bool                          { return false }
func (f *fakeApplier) Send(ctx context.Context) error      { return nil }
func (f *fakeApplier) MayCopy() bool                       { return !f.noCopy }

func (f *fakeApplier) Relation(ctx context.Context, rel uint32) (*relmap.Entry, error) {
	name := "t" + strconv.FormatUint(uint64(rel), 10)
	return &relmap.Entry{
		Rel:    &protocol.Relation{RelationID: rel, Columns: []protocol.RelationColumn{{Name: "id"}, {Name: "v"}}},
		Mapped: true,
		Target: &relmap.Table{Quoted: name, Columns: []relmap.Column{{Name: "id"}, {Name: "v"}}, RowSecurity: rel == 9},
		Tcol:   []int{0, 1},
	}, nil
}

func (f *fakeApplier) QueueCopy(e *relmap.Entry, sql string, data []byte, rows int64) {
	if strings.HasSuffix(sql, "(FORMAT binary)") {
		f.rec("copy %s: %d rows, %d bytes", sql, rows, len(data))
		return
	}
	f.rec("copy %s: %d rows %q", sql, rows, data)
}

func (f *fakeApplier) SetEnd(lsn, applied protocol.LSN) { f.rec("end at %s, applied %s", lsn, applied) }

func (f *fakeApplier) Commit(ctx context.Context, end protocol.LSN, at protocol.Timestamp) error {
	f.WriteOut(ctx)
	f.rec("commit, origin at %s", end)
	return nil
}

func (f *fakeApplier) Prepare(ctx context.Context, end protocol.LSN, at protocol.Timestamp, gid string) error {
	f.WriteOut(ctx)
	f.rec("prepare %s, origin at %s", gid, end)
	return nil
}

func (f *fakeApplier) Rollback(ctx context.Context) error {
	f.rec("rollback")
	return nil
}

func (f *fakeApplier) Reset()      { f.rec("reset") }
func (f *fakeApplier) Lost() bool  { return false }
func (f *fakeApplier) MoveStats()  {}
func (f *fakeApplier) DropStats()  {}
func (f *fakeApplier) PID() uint32 { return f.pid }
func (f *fakeApplier) Cancel(ctx context.Context) error {
	return nil
}
func (f *fakeApplier) Close(ctx context.Context) {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
}

// fakeDialer hands out fakeAppliers, or fails while err is set.
type fakeDialer struct {
	err   error
	apps  []*fakeApplier
	setup func(*fakeApplier)
}

func (d *fakeDialer) Worker(ctx context.Context, id int) (Applier, error) {
	if d.err != nil {
		return nil, d.err
	}
	f := &fakeApplier{pid: uint32(1000 + id)}
	if d.setup != nil {
		d.setup(f)
	}
	d.apps = append(d.apps, f)
	return f, nil
}
