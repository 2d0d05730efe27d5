package engine

import "github.com/walapply/walapply/protocol"

// Outcome tells the run loop what a step of the applier (Handle, Idle,
// CommitAndSettle) did to transactions, so that it can keep the
// FlushTracker balanced: every Began is followed by
// exactly one Applied, Skipped or Ended. A message that both starts and
// ends a transaction on the target (Stream Commit, Commit Prepared,
// Rollback Prepared) sets Began as well as its end.
type Outcome struct {
	Began   bool         // a source transaction started
	Applied bool         // ... and was committed or prepared on the target, ending at End
	Skipped bool         // ... and was skipped as already applied (DESIGN.md invariant 1)
	Ended   bool         // ... and ended with nothing to commit on the target
	End     protocol.LSN // with Applied: the source end LSN recorded in the origin
	// Count is how many source transactions the Applied commit covered
	// (group commit); 0 means 1.
	Count int
}

// NoteApplied records that a source transaction ending at end is now
// committed (or prepared) on the target.
func (o *Outcome) NoteApplied(end protocol.LSN) { o.Applied, o.End = true, end }

// NoteSkipped records that a source transaction was skipped as already
// applied.
func (o *Outcome) NoteSkipped() { o.Skipped = true }

// FoldApplied records a two-phase step that committed or prepared its
// transaction, ending at end. The Fold methods record how a two-phase step
// ended its transaction. The same step may already have recorded commits
// of the batch before it (Settle): the step then adds to their count
// rather than replacing the outcome, so that every Began still meets
// exactly one end.
func (o *Outcome) FoldApplied(end protocol.LSN) {
	prior := o.Applied
	o.NoteApplied(end)
	if prior {
		o.Count++
	}
}

// FoldSkipped records a two-phase step that skipped its transaction as
// already applied.
func (o *Outcome) FoldSkipped() {
	if !o.Applied {
		o.NoteSkipped()
		return
	}
	o.Count++
}

// FoldEnded records a two-phase step that ended its transaction with
// nothing to commit on the target.
func (o *Outcome) FoldEnded() {
	if o.Applied {
		o.Count++
		return
	}
	o.Ended = true
}

// AlreadyApplied is the one rule (DESIGN.md invariant 1) by which every path
// (Begin, Stream Commit, Begin Prepare / Stream Prepare, Commit and Rollback
// Prepared) recognises a source transaction applied before a restart. at is
// a position inside the record that ends the transaction on the source: its
// start (Begin's final LSN, Stream Commit's commit LSN, the prepare LSN), or,
// for a message that only carries the record's end, that end minus one.
// origin is the origin's progress, the end LSN of the last transaction
// applied. Source records do not overlap, so the transaction was applied
// exactly when its end record starts before that end: at < origin.
//
// A two-phase transaction before the origin may still have to be applied
// (prepared before two-phase decoding began on the slot): the prepare path
// asks the target whether its GID is prepared (apply's startPrepared). A
// different rule, per table, decides which changes a table's initial copy
// already holds (CopyFilter): it compares with the copy's snapshot point and
// xids, not with the origin, and drops changes, not whole transactions.
func AlreadyApplied(at, origin protocol.LSN) bool { return at < origin }
