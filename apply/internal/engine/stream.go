package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/walapply/walapply/apply/internal/parallel"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/state"
)

// streamState is the applier's part in streamed transactions.
//
// Streamed in-progress transactions.
//
// With streaming on (pgoutput protocol 2, PostgreSQL 14+), the source does
// not hold a large transaction back until it commits: once its decoded
// changes pass logical_decoding_work_mem, it sends them in blocks, Stream
// Start … Stream Stop, each naming the top-level xid, interleaved with the
// blocks of other open transactions and with ordinary transactions. The
// transaction may still abort, as a whole or one subtransaction at a time
// (ROLLBACK TO SAVEPOINT), and it reaches its commit order only at Stream
// Commit. Applying the blocks as they come would expose uncommitted data and
// break commit order; holding them in memory would make memory grow with the
// transaction. So, as PostgreSQL's apply worker does (worker.c, "streamed
// transactions"):
//
//   - every message inside a block is appended, as the raw bytes received, to
//     the spill file of its top-level xid (state.SpillFile), tagged with the
//     subtransaction that made it;
//   - a Stream Abort of a subtransaction truncates the file at that
//     subtransaction's first record (DESIGN.md invariant 4), one of the
//     top-level xid removes the file;
//   - Stream Commit replays the file, read sequentially through a bounded
//     buffer and decoded with the same decoder as the live stream, into ONE
//     target transaction that advances the origin to the commit's end LSN
//     like any other (invariant 1), then removes the file. The target batch
//     is bounded too (internal/pipeline), so memory does not depend on the
//     transaction's size (invariant 3).
//
// Nothing streamed is confirmed to the source before its commit is applied
// (the source's own position does not pass the commit record before it has
// sent Stream Commit), so after any failure the source streams every open
// transaction again from its first change: spill files are scratch space,
// removed when a session ends and, after a crash, when the next one starts.
// That is also why an I/O error while spilling (a full disk) is transient:
// nothing was applied, the run reconnects, and once space is back the
// source's resend succeeds.
//
// With --streaming parallel (protocol 4, PostgreSQL 16+) a streamed
// transaction is instead applied as its blocks arrive, on a target
// connection of its own (internal/parallel, stream_parallel.go), and
// takes this spill path only when no such connection is free or it cannot
// be applied that way.
type streamState struct {
	dir *state.SpillDir // nil when streaming is off
	// files holds the spill file of every streamed transaction begun in
	// this session and not yet committed or aborted.
	files map[uint32]*state.SpillFile
	block *state.SpillFile // the file of the open stream block
	// raw is the message being handled as received, set by the run loop
	// before Handle: what goes into the spill file.
	raw []byte
	// dec decodes spilled changes at replay; it is not the live stream's
	// decoder, whose Stream Commit message is still in use during replay.
	dec *protocol.Decoder
	// keepalive tells the source the applier is alive during a long
	// replay, every keepaliveEvery; nil in tests without a source.
	keepalive      func(context.Context) error
	keepaliveEvery time.Duration
	// par applies streamed transactions as they stream, with --streaming
	// parallel (stream_parallel.go); nil otherwise. spillOnly says which
	// transactions fell back in an earlier session and take the spill path;
	// committed, tests' hook (nil), runs right after a worker committed.
	par       *parallel.Pool
	spillOnly func(xid uint32) bool
	committed func(xid uint32) error
}

// replayDecoderOptions are those of the decoder of spilled changes. The
// message types a stream block may carry exist since protocol 1 and are laid
// out the same in versions 2 to 4 (with the xid); the version-dependent
// parts of the protocol (Stream Abort's abort info, two-phase messages) never
// reach a spill file.
var replayDecoderOptions = protocol.DecoderOptions{ProtoVersion: 2}

// SetKeepalive sets what tells the source the applier is alive during a
// long replay, and how often.
func (st *streamState) SetKeepalive(keepalive func(context.Context) error, every time.Duration) {
	st.keepalive, st.keepaliveEvery = keepalive, every
}

// OpenStreamState opens the spill directory dir of applier for target on
// fsys and returns the applier's streaming state, and the stale files it
// removed.
func OpenStreamState(fsys state.FS, dir, applier, target string) (streamState, []string, error) {
	sd, removed, err := state.OpenSpillDir(fsys, dir, applier, target)
	if err != nil {
		return streamState{}, removed, openSpillDirError(dir, err)
	}
	dec, err := protocol.NewDecoder(replayDecoderOptions)
	if err != nil {
		return streamState{}, removed, err
	}
	return streamState{dir: sd, files: map[uint32]*state.SpillFile{}, dec: dec}, removed, nil
}

// handleStream acts on the events of streamed transactions.
func (a *Applier) handleStream(ctx context.Context, ev Event, msg protocol.Message) error {
	st := &a.stream
	if st.dir == nil {
		return OrderError("%s message, but streaming was not asked for", msg.Type())
	}
	if done, err := a.parallelStream(ctx, ev, msg); done { // stream_parallel.go
		return err
	}
	switch ev {
	case EvStreamStart:
		return a.streamStart(msg.(*protocol.StreamStart))
	case EvStreamStop:
		return a.streamStop()
	case EvStreamChange:
		return a.streamChange(msg)
	case EvStreamAbort:
		return a.streamAbort(msg.(*protocol.StreamAbort))
	case EvStreamCommit:
		return a.streamCommit(ctx, msg.(*protocol.StreamCommit))
	}
	return OrderError("unexpected %s for streamed transactions", ev)
}

// streamStart opens the spill file of the block's transaction: a new one for
// its first segment, else the one its earlier blocks went to.
func (a *Applier) streamStart(m *protocol.StreamStart) error {
	st := &a.stream
	f := st.files[m.Xid]
	switch {
	case m.FirstSegment:
		if f != nil || st.dir.Has(m.Xid) { // cannot happen: the machine checks first segments
			return OrderError("first Stream Start for xid %d, which has a spill file already", m.Xid)
		}
		var err error
		if f, err = st.dir.Create(m.Xid); err != nil {
			return newSpillError(m.Xid, st.dir.Path(m.Xid), "creating", err)
		}
		st.files[m.Xid] = f
	case f == nil:
		return OrderError("Stream Start continues xid %d, which has no spill file", m.Xid)
	default:
		if _, err := st.dir.Open(m.Xid); err != nil {
			return newSpillError(m.Xid, f.Path(), "reopening", err)
		}
	}
	st.block = f
	return nil
}

// streamStop closes the block's file, so that the number of open files does
// not grow with the number of open streamed transactions.
func (a *Applier) streamStop() error {
	st := &a.stream
	f := st.block
	st.block = nil
	if f == nil {
		return nil
	}
	if err := f.Close(); err != nil {
		return newSpillError(f.Xid(), f.Path(), "writing", err)
	}
	return nil
}

// streamChange appends one message of the open block to its spill file, as
// received, tagged with the (sub)transaction that made it. Relation and
// Type messages go there too: they describe the relations as of this
// transaction and take effect when it is replayed.
func (a *Applier) streamChange(msg protocol.Message) error {
	st := &a.stream
	f := st.block
	if f == nil {
		return OrderError("%s inside a stream block that has no spill file", msg.Type())
	}
	subxid := streamedXid(msg)
	if subxid == 0 {
		return OrderError("%s inside the stream block of xid %d carries no xid", msg.Type(), f.Xid())
	}
	if len(st.raw) == 0 || protocol.MessageType(st.raw[0]) != msg.Type() {
		return fmt.Errorf("apply: internal error: the raw bytes of a streamed %s were not passed to the applier", msg.Type())
	}
	if err := f.Append(subxid, st.raw); err != nil {
		return newSpillError(f.Xid(), f.Path(), "writing", err)
	}
	return nil
}

// streamedXid returns the xid a message inside a stream block carries, or 0.
func streamedXid(msg protocol.Message) uint32 {
	switch m := msg.(type) {
	case *protocol.Insert:
		return m.Xid
	case *protocol.Update:
		return m.Xid
	case *protocol.Delete:
		return m.Xid
	case *protocol.Truncate:
		return m.Xid
	case *protocol.Relation:
		return m.Xid
	case *protocol.TypeMessage:
		return m.Xid
	case *protocol.LogicalMessage:
		return m.Xid
	}
	return 0
}

// streamAbort discards a subtransaction's changes, or the whole file.
func (a *Applier) streamAbort(m *protocol.StreamAbort) error {
	if m.Toplevel() {
		a.log.Debug().Uint32("xid", m.Xid).Msg("streamed transaction aborted; its spill file is removed")
		return a.dropSpilled(m.Xid)
	}
	f := a.stream.files[m.Xid]
	if f == nil {
		return nil // nothing of it was spilled in this session
	}
	before := f.Records()
	if err := f.AbortSubxact(m.SubXid); err != nil {
		return newSpillError(m.Xid, f.Path(), fmt.Sprintf("discarding subtransaction %d", m.SubXid), err)
	}
	a.log.Debug().Uint32("xid", m.Xid).Uint32("subxid", m.SubXid).Int64("discarded", before-f.Records()).
		Msg("subtransaction of a streamed transaction aborted; its changes are discarded")
	return nil
}
