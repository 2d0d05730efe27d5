package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/internal/spillfs"
	"github.com/walapply/walapply/protocol"
	pt "github.com/walapply/walapply/protocol/protocoltest"
	"github.com/walapply/walapply/state"
)

// spillApplier is an applier with streaming state over fsys, without a
// target: enough for everything but Stream Commit.
func spillApplier(t *testing.T, fsys state.FS) (*Applier, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "spill")
	st, _, err := OpenStreamState(fsys, dir, "unit", "target")
	if err != nil {
		t.Fatal(err)
	}
	a := &Applier{log: zerolog.Nop(), machine: NewMachine(), rels: relmap.NewCache(false), stream: st}
	return a, dir
}

// feed decodes raw pgoutput messages and hands them to the applier as the
// run loop does, raw bytes included.
func feed(t *testing.T, a *Applier, dec *protocol.Decoder, msgs ...[]byte) error {
	t.Helper()
	for _, raw := range msgs {
		msg, err := dec.Decode(raw)
		if err != nil {
			t.Fatalf("decoding %q: %v", raw, err)
		}
		a.stream.raw = raw
		if _, _, err := a.Handle(context.Background(), msg); err != nil {
			return err
		}
	}
	return nil
}

// spilled returns the (subxid, message type) of every record of xid's file.
func spilled(t *testing.T, a *Applier, xid uint32) []string {
	t.Helper()
	r, err := a.stream.dir.OpenReader(xid)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []string
	for {
		sub, msg, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		m, err := a.stream.dec.DecodeStreamedChange(msg)
		if err != nil {
			t.Fatal(err)
		}
		ins, _ := m.(*protocol.Insert)
		val := ""
		if ins != nil {
			val = string(ins.New.Columns[0].Data)
		}
		out = append(out, strings.TrimSpace(fmt.Sprintf("%d %s %s", sub, m.Type(), val)))
	}
}

// TestSpillTranscript feeds interleaved streamed transactions with
// subtransaction aborts and checks what their spill files hold.
func TestSpillTranscript(t *testing.T) {
	a, dir := spillApplier(t, state.OSFS)
	dec, err := protocol.NewDecoder(protocol.DecoderOptions{ProtoVersion: 4, StreamingParallel: true})
	if err != nil {
		t.Fatal(err)
	}
	rel := pt.Relation(16384, 100, "public", "t", protocol.ReplicaIdentityDefault, pt.Column("id", 23, true))
	ins := func(xid uint32, v string) []byte { return pt.Insert(16384, xid, pt.Text(v)) }
	// xid 100 has subtransactions 101, 102 (child of 101) and 103; xid 200
	// streams in between.
	err = feed(t, a, dec,
		pt.StreamStart(100, true), rel, ins(100, "a"), ins(101, "b"), ins(102, "c"), pt.StreamStop(),
		pt.StreamStart(200, true), pt.Insert(16384, 200, pt.Text("x")), pt.StreamStop(),
		pt.StreamStart(100, false), ins(101, "d"), ins(103, "e"), ins(100, "f"), pt.StreamStop(),
	)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"100 Relation", "100 Insert a", "101 Insert b", "102 Insert c", "101 Insert d", "103 Insert e", "100 Insert f"}
	if got := spilled(t, a, 100); !equalStrings(got, want) {
		t.Fatalf("spill file of xid 100:\n got %q\nwant %q", got, want)
	}
	// ROLLBACK TO a savepoint inside 101: the child 102 aborts first, then
	// 101; everything from 101's first change on goes (103 and the last
	// top-level change came after it). An abort of a subxact without
	// changes, and of an xid never streamed, change nothing.
	err = feed(t, a, dec, pt.StreamAbortParallel(100, 102, 0x100, 1), pt.StreamAbortParallel(100, 104, 0x101, 1))
	if err != nil {
		t.Fatal(err)
	}
	want = []string{"100 Relation", "100 Insert a", "101 Insert b"}
	if got := spilled(t, a, 100); !equalStrings(got, want) {
		t.Fatalf("after aborting 102:\n got %q\nwant %q", got, want)
	}
	if err := feed(t, a, dec, pt.StreamAbortParallel(100, 101, 0x102, 1), pt.StreamAbortParallel(300, 300, 0x103, 1)); err != nil {
		t.Fatal(err)
	}
	want = []string{"100 Relation", "100 Insert a"}
	if got := spilled(t, a, 100); !equalStrings(got, want) {
		t.Fatalf("after aborting 101:\n got %q\nwant %q", got, want)
	}
	// Appending after an abort continues where the file was cut.
	if err := feed(t, a, dec, pt.StreamStart(100, false), ins(105, "g"), pt.StreamStop()); err != nil {
		t.Fatal(err)
	}
	want = []string{"100 Relation", "100 Insert a", "105 Insert g"}
	if got := spilled(t, a, 100); !equalStrings(got, want) {
		t.Fatalf("after appending again:\n got %q\nwant %q", got, want)
	}
	// A top-level abort removes the file.
	if err := feed(t, a, dec, pt.StreamAbortParallel(200, 200, 0x104, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(a.stream.dir.Path(200)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("spill file of aborted xid 200: %v, want it removed", err)
	}
	// dropSpilled (used after Stream Prepare) removes a file too; after a
	// top-level abort a new transaction may reuse the xid.
	if err := feed(t, a, dec, pt.StreamAbortParallel(100, 100, 0x105, 1), pt.StreamStart(300, true), ins(300, "i"), pt.StreamStop()); err != nil {
		t.Fatal(err)
	}
	if err := a.dropSpilled(300); err != nil {
		t.Fatal(err)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*.spill"))
	if len(names) != 0 {
		t.Errorf("spill files left after the transactions ended: %v", names)
	}
	if err := feed(t, a, dec, pt.StreamStart(100, true), ins(100, "h"), pt.StreamStop()); err != nil {
		t.Fatal(err)
	}
	if got := spilled(t, a, 100); !equalStrings(got, []string{"100 Insert h"}) {
		t.Fatalf("reused xid: %q", got)
	}
}

// TestSpillWriteErrors: a full disk or EIO while spilling is a SpillError
// naming the file, transient (the run reconnects and the source resends),
// and leaves the file as it was before the failed message.
func TestSpillWriteErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		inject func(f *spillfs.FaultFS)
		want   string
	}{
		{"enospc", func(f *spillfs.FaultFS) { f.LimitSpace(1000) }, "no space left on device"},
		{"eio", func(f *spillfs.FaultFS) { f.FailWrites(syscall.EIO) }, "input/output error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fault := spillfs.NewFaultFS(spillfs.OSFS)
			a, _ := spillApplier(t, fault)
			a.stream.dir.BufferSize = 512 // small, so that appends reach the disk
			dec, _ := protocol.NewDecoder(protocol.DecoderOptions{ProtoVersion: 2})
			big := strings.Repeat("v", 300)
			if err := feed(t, a, dec, pt.StreamStart(7, true), pt.Insert(1, 7, pt.Text(big))); err != nil {
				t.Fatal(err)
			}
			tc.inject(fault)
			var err error
			for i := 0; i < 20 && err == nil; i++ {
				err = feed(t, a, dec, pt.Insert(1, 7, pt.Text(big)))
			}
			var se *SpillError
			if !errors.As(err, &se) || se.Xid != 7 || se.Path != a.stream.dir.Path(7) {
				t.Fatalf("error %v (%T), want a SpillError for xid 7", err, err)
			}
			msg := err.Error()
			for _, frag := range []string{a.stream.dir.Path(7), tc.want, "nothing of the transaction was applied or confirmed"} {
				if !strings.Contains(msg, frag) {
					t.Errorf("error %q does not mention %q", msg, frag)
				}
			}
			if !Transient(err) {
				t.Errorf("Transient(%v) = false; a spill I/O error must be retried", err)
			}
		})
	}
	// A permission problem is not retried.
	err := newSpillError(1, "/x/xid-1.spill", "writing", &os.PathError{Op: "open", Path: "/x", Err: os.ErrPermission})
	if Transient(err) {
		t.Errorf("Transient(%v) = true, want permanent", err)
	}
	err = newSpillError(1, "/x/xid-1.spill", "reading", state.ErrSpillCorrupt)
	if Transient(err) || !errors.Is(err, state.ErrSpillCorrupt) {
		t.Errorf("corrupt spill file: Transient(%v) = true, want permanent", err)
	}
}

func TestSameRelation(t *testing.T) {
	mk := func(cols ...protocol.RelationColumn) *protocol.Relation {
		return &protocol.Relation{RelationID: 5, Namespace: "s", Name: "t", ReplicaIdentity: 'd', Columns: cols}
	}
	a := mk(pt.Column("id", 23, true), pt.Column("v", 25, false))
	if !sameRelation(a, mk(pt.Column("id", 23, true), pt.Column("v", 25, false))) {
		t.Error("identical relations differ")
	}
	for _, b := range []*protocol.Relation{
		mk(pt.Column("id", 23, true)),
		mk(pt.Column("id", 23, true), pt.Column("v", 1043, false)),
		mk(pt.Column("id", 23, false), pt.Column("v", 25, false)),
		mk(pt.Column("id", 23, true), pt.Column("w", 25, false)),
	} {
		if sameRelation(a, b) {
			t.Errorf("%+v and %+v are the same", a.Columns, b.Columns)
		}
	}
}

// TestReplayKeepalive: a long replay keeps telling the source the applier
// is alive, every keepaliveEvery, and a failing keepalive does not stop it.
func TestReplayKeepalive(t *testing.T) {
	a, _ := spillApplier(t, state.OSFS)
	dec, _ := protocol.NewDecoder(protocol.DecoderOptions{ProtoVersion: 2})
	msgs := [][]byte{pt.StreamStart(9, true)}
	for i := 0; i < 3*keepaliveCheck; i++ {
		msgs = append(msgs, pt.Insert(1, 9, pt.Text("v")))
	}
	if err := feed(t, a, dec, append(msgs, pt.StreamStop())...); err != nil {
		t.Fatal(err)
	}
	calls := 0
	a.stream.keepalive = func(context.Context) error { calls++; return errors.New("source gone") }
	a.stream.keepaliveEvery = 0
	r, err := a.stream.dir.OpenReader(9)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p := &replayer{r: r, dec: a.stream.dec, xid: 9, path: a.stream.dir.Path(9), a: a, ctx: context.Background()}
	n := 0
	for {
		msg, err := p.next()
		if err != nil {
			t.Fatal(err)
		}
		if msg == nil {
			break
		}
		n++
	}
	if n != 3*keepaliveCheck || calls != 3 {
		t.Errorf("replayed %d messages with %d keepalives, want %d and 3", n, calls, 3*keepaliveCheck)
	}
	a.stream.keepaliveEvery = time.Hour // not due
	p = &replayer{r: r, a: a, ctx: context.Background(), lastKeepalive: time.Now()}
	p.n = keepaliveCheck - 1
	p.keepalive()
	if calls != 3 {
		t.Errorf("keepalive sent before it was due")
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
