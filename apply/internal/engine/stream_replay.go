package engine

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/state"
)

// streamCommit applies a streamed transaction at its commit: the spill file
// replayed into one target transaction that also advances the origin.
func (a *Applier) streamCommit(ctx context.Context, m *protocol.StreamCommit) error {
	// Like a Begin and a Commit at once (see outcome).
	a.outcome.Began = true
	a.txn = openTxn{xid: m.Xid, finalLSN: m.CommitLSN, commitTime: m.CommitTime, skip: AlreadyApplied(m.CommitLSN, a.applied)}
	if a.txn.skip {
		if err := a.dropSpilled(m.Xid); err != nil {
			a.log.Warn().Err(err).Uint32("xid", m.Xid).Msg("removing the spill file of a streamed transaction applied before")
		}
		a.noteSkipped()
		return nil
	}
	if a.skipMatches(m.CommitLSN) { // --skip-lsn (skip.go): committed empty
		if err := a.dropSpilled(m.Xid); err != nil {
			a.log.Warn().Err(err).Uint32("xid", m.Xid).Msg("removing the spill file of a streamed transaction skipped by --skip-lsn")
		}
		a.queue.TxnXid, a.queue.TxnLSN = m.Xid, m.CommitLSN
		a.sess.Begin()
		a.recordUserSkip()
		return a.commit(ctx, m.EndLSN, m.CommitTime)
	}
	start := time.Now()
	var size, records int64
	if f := a.stream.files[m.Xid]; f != nil {
		size, records = f.Size(), f.Records()
	}
	if err := a.replaySpilled(ctx, m.Xid); err != nil {
		return err
	}
	a.notePassed(m.CommitLSN)
	// pgoutput streams a large transaction even when none of its changes
	// is published (it cannot tell before the transaction ends), so the
	// replay may have written nothing; the origin advance then gives the
	// target transaction an xid (state.XactSetupSQL), or PostgreSQL would
	// write no commit record and the origin would stay behind
	// (TestStreamedEmptyTransaction).
	if err := a.commit(ctx, m.EndLSN, m.CommitTime); err != nil {
		return err
	}
	a.log.Info().Uint32("xid", m.Xid).Stringer("commit_lsn", m.CommitLSN).Int64("spilled_bytes", size).
		Int64("spilled_messages", records).Float64("replay_seconds", Seconds(time.Since(start))).Msg("replayed a streamed transaction; its commit is sent")
	if err := a.dropSpilled(m.Xid); err != nil {
		// The file is only garbage now (should the commit fail, the source
		// sends the transaction again), and the next start removes it.
		a.log.Warn().Err(err).Uint32("xid", m.Xid).Msg("removing the spill file of an applied streamed transaction")
	}
	return nil
}

// replaySpilled begins a target transaction and applies into it the changes
// spilled for the streamed transaction xid, in order, without committing:
// the caller ends it (COMMIT at Stream Commit, PREPARE TRANSACTION at Stream
// Prepare) after queueing the origin advance, or on error it has already
// been rolled back. The caller sets a.txn (xid, commit or prepare LSN, time)
// first, as a Begin does, so that errors and conflicts name the
// transaction. The file stays; dropSpilled removes it.
//
// The file is read sequentially through a bounded buffer, every record's
// checksum verified; a damaged file is an error naming it, and nothing of
// the transaction is applied.
func (a *Applier) replaySpilled(ctx context.Context, xid uint32) error {
	st := &a.stream
	if st.dir == nil {
		return OrderError("replay of streamed transaction %d, but streaming was not asked for", xid)
	}
	if st.files[xid] == nil {
		return OrderError("replay of streamed transaction %d, which has no spill file in this session", xid)
	}
	if st.block != nil && st.block.Xid() == xid {
		return OrderError("replay of streamed transaction %d inside its own stream block", xid)
	}
	path := st.dir.Path(xid)
	r, err := st.dir.OpenReader(xid)
	if err != nil {
		return newSpillError(xid, path, "opening for replay", err)
	}
	defer r.Close()
	p := &replayer{r: r, dec: st.dec, xid: xid, path: path, a: a, ctx: ctx, lastKeepalive: time.Now()}
	a.queue.TxnXid, a.queue.TxnLSN = xid, a.txn.finalLSN // as a Begin does
	a.sess.Begin()
	var runRel uint32 // the relation of a run of inserts, and its length
	var run int
	for {
		msg, err := p.next()
		if err != nil {
			return a.fail(ctx, err)
		}
		if msg == nil {
			return nil
		}
		if ts, _ := a.watch.touches(a, msg); ts != nil {
			// Its table is being copied: the next session copies it
			// before streaming (table_sync.go).
			return a.fail(ctx, &NewTablesError{Tables: []sqlgen.Rel{ts.name}})
		}
		if msg = a.copied.Filter(a.rels, a.txn.xid, a.txn.finalLSN, msg); msg == nil {
			continue // the table's initial copy holds it (CopyFilter)
		}
		if ins, ok := msg.(*protocol.Insert); ok {
			if ins.RelationID != runRel {
				runRel, run = ins.RelationID, 0
			}
			if run++; run > CopyMinRun && a.insertsMayCopy() {
				copied, err := a.copyInserts(ctx, p, ins)
				if err != nil {
					return err
				}
				if copied {
					runRel, run = 0, 0
					continue
				}
			}
		} else {
			runRel, run = 0, 0
		}
		switch m := msg.(type) {
		case *protocol.Relation:
			a.putStreamedRelation(m)
		case *protocol.TypeMessage:
			a.rels.PutType(m)
		case *protocol.Insert, *protocol.Update, *protocol.Delete, *protocol.Truncate:
			if err := a.change(ctx, msg); err != nil {
				return a.fail(ctx, err)
			}
			if a.sess.Full() || a.checks(msg) {
				if failed, err := a.flushChange(ctx, msg); err != nil {
					return a.failStmt(ctx, failed, err)
				}
			}
		case *protocol.LogicalMessage:
			if err := a.ddlMessage(ctx, m); err != nil { // ddl_apply.go
				return err
			}
		default:
			// Origin messages: nothing to apply, as in an ordinary
			// transaction.
		}
	}
}

// replayer reads the messages of a spill file in order.
type replayer struct {
	r    *state.SpillReader
	dec  *protocol.Decoder
	xid  uint32
	path string
	// stash is a message read but not yet applied: the one that ended a
	// run of inserts sent with COPY.
	stash protocol.Message

	a             *Applier
	ctx           context.Context
	n             int
	lastKeepalive time.Time
}

// keepaliveCheck is how many records are replayed between looks at the
// clock for a keepalive to the source.
const keepaliveCheck = 4096

// next returns the next message, or nil at the end of the file. The
// message is valid until the next call.
func (p *replayer) next() (protocol.Message, error) {
	if m := p.stash; m != nil {
		p.stash = nil
		return m, nil
	}
	if p.n++; p.n%keepaliveCheck == 0 {
		p.keepalive()
	}
	subxid, raw, err := p.r.Next()
	if err == io.EOF {
		return nil, nil
	}
	if err != nil {
		return nil, newSpillError(p.xid, p.path, "reading", err)
	}
	msg, err := p.dec.DecodeStreamedChange(raw)
	if err != nil {
		// It decoded when it arrived, and its checksum matches.
		return nil, &PermanentError{Err: fmt.Errorf("apply: internal error: record before offset %d of spill file %s does not decode: %w", p.r.Offset(), p.path, err)}
	}
	if got := streamedXid(msg); got != subxid && got != 0 {
		return nil, newSpillError(p.xid, p.path, "reading", fmt.Errorf("%w: record before offset %d is tagged with subxid %d, its message carries %d", state.ErrSpillCorrupt, p.r.Offset(), subxid, got))
	}
	return msg, nil
}

// dropSpilled removes the spill file of the streamed transaction xid, if it
// has one (after its commit or prepare, or when it aborted).
func (a *Applier) dropSpilled(xid uint32) error {
	st := &a.stream
	if st.dir == nil {
		return nil
	}
	if st.block != nil && st.block.Xid() == xid {
		st.block = nil
	}
	delete(st.files, xid)
	if err := st.dir.Remove(xid); err != nil {
		return newSpillError(xid, st.dir.Path(xid), "removing", err)
	}
	return nil
}

// putStreamedRelation remembers a Relation message replayed from a spill
// file. pgoutput sends the schema again in every streamed transaction; an
// unchanged description keeps the cached entry, with its target mapping and
// prepared statements, instead of preparing them all again.
func (a *Applier) putStreamedRelation(rel *protocol.Relation) {
	if e := a.rels.Rels[rel.RelationID]; e != nil && sameRelation(e.Rel, rel) {
		return
	}
	a.rels.PutRelation(rel)
}

func sameRelation(x, y *protocol.Relation) bool {
	return x.RelationID == y.RelationID && x.Namespace == y.Namespace && x.Name == y.Name &&
		x.ReplicaIdentity == y.ReplicaIdentity && slices.Equal(x.Columns, y.Columns)
}

// keepalive sends a status update to the source when one is due. It may run
// on CopyFrom's goroutine while the applier's waits for CopyFrom: the source
// connection is not the target's, and nothing else uses it meanwhile. A
// failure is only logged: the replay does not need the source, and the run
// loop finds a broken connection at its next receive.
func (p *replayer) keepalive() {
	st := &p.a.stream
	if st.keepalive == nil || time.Since(p.lastKeepalive) < st.keepaliveEvery {
		return
	}
	p.lastKeepalive = time.Now()
	if err := st.keepalive(p.ctx); err != nil {
		p.a.log.Debug().Err(err).Msg("sending a keepalive to the source during a replay")
	}
}
