package engine

import (
	"context"

	"github.com/walapply/walapply/apply/internal/pipeline"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/state"
)

// commit queues the origin advance and COMMIT of the open target
// transaction, sends everything and records the new progress. Source
// transactions grouped into the target transaction are committed with it.
func (a *Applier) commit(ctx context.Context, end protocol.LSN, at protocol.Timestamp) error {
	if err := a.writeOut(ctx); err != nil {
		return a.fail(ctx, err)
	}
	n := a.group.Count + 1
	// The progress is set up last, right before COMMIT: on PostgreSQL 16+
	// a transaction that aborts after it still advances the origin. It
	// also gives a transaction that wrote nothing an xid, so that its
	// commit is recorded and moves the origin (state.XactSetupSQL).
	a.queueOriginAdvance(end, at)
	a.sess.QueueSQL(pipeline.OpCommit, nil, "COMMIT")
	a.group = Group{}
	// Sent without waiting: the target executes it while the next
	// messages are received and queued. Its result is read before the
	// next batch goes out (Settle), and only then does it count as applied.
	if failed, err := a.sess.SendAsync(ctx, &pipeline.CommitMark{End: end, At: at, Count: n}); err != nil {
		return a.failStmt(ctx, failed, err)
	}
	a.collect()
	return nil
}

// Settle waits for the batch in flight and records the commit it carried.
// The connection is then free for other statements.
func (a *Applier) Settle(ctx context.Context) error {
	if failed, err := a.sess.Drain(ctx); err != nil {
		return a.failStmt(ctx, failed, err)
	}
	a.collect()
	return nil
}

// collect records the commits that drained batches confirmed.
func (a *Applier) collect() {
	for _, m := range a.queue.Done {
		a.Stats.Commits.Add(1)
		a.noteApplied(m.End, m.At)
		a.outcome.Count += m.Count
		a.Stats.TxnsApplied.Add(int64(m.Count - 1))
	}
	a.queue.Done = a.queue.Done[:0]
}

// noteApplied records that the source transaction ending at end is now
// committed (or prepared) on the target.
func (a *Applier) noteApplied(end protocol.LSN, at protocol.Timestamp) {
	a.applied, a.appliedTime = end, at
	a.Stats.TxnsApplied.Add(1)
	a.outcome.NoteApplied(end)
}

// noteSkipped records that a source transaction was already applied.
func (a *Applier) noteSkipped() {
	a.Stats.TxnsSkipped.Add(1)
	a.outcome.NoteSkipped()
}

// queueOriginAdvance records the source position inside the target
// transaction, so the commit and the progress are one atomic fact.
func (a *Applier) queueOriginAdvance(end protocol.LSN, at protocol.Timestamp) {
	a.params = state.AppendXactSetupArgs(a.params[:0], end, at.Time())
	a.formats = append(a.formats[:0], 0, 0)
	a.sess.QueueStmt(pipeline.OpOrigin, nil, a.queue.XactSetup, a.params, a.formats, 0, 0)
}
