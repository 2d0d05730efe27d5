package engine

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/walapply/walapply/apply/internal/pipeline"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/protocol"
)

// The kinds of walapply.conflicts rows that record a use of --skip-lsn.
const (
	SkipKindPassed = "skip_lsn_passed"
)

// SkipUse is a use of a --skip-lsn recorded on the target.
type SkipUse struct {
	Passed    bool         // the stream went past the LSN without meeting it
	Xid       uint32       // the transaction skipped, or the first applied past the LSN
	CommitLSN protocol.LSN // that transaction's commit (or prepare) LSN
	At        time.Time
}

// decideSkip is the start check of a --skip-lsn flag: flag is its LSN (0:
// none), origin the origin's progress, used its recorded use (nil: none).
// It returns the LSN to skip (0: none), a warning to log when the flag is
// ignored, or a permanent error when the flag cannot mean anything.
//
// Skipping a source transaction with --skip-lsn, as strictly as ALTER
// SUBSCRIPTION ... SKIP (lsn = ...) does:
//
//   - At start (armSkip), an LSN at or below the origin's progress is
//     refused: every transaction that ends there is applied already, so the
//     flag can only be a mistake or a leftover.
//   - A skip is used once. The transaction whose commit LSN (prepare LSN for
//     a prepared transaction) is the skip LSN is committed empty on the
//     target, with the origin moved past it; the same target transaction
//     writes a skipped_by_user row to walapply.conflicts. A start that finds
//     that row ignores the flag with a warning, so a flag left in the
//     environment or a manifest never skips anything else. That check comes
//     first: after the skip, the skip LSN is also below the origin's
//     progress, and it must be reported as used, not refused.
//   - A skip LSN the stream goes past without meeting a transaction that
//     ends there is spent too, as PostgreSQL clears subskiplsn: the first
//     transaction applied past it logs a warning and records a
//     skip_lsn_passed row (key: the skip LSN; source_xid, commit_lsn: that
//     transaction) in its own target transaction.
//   - A transaction that fails while a skip LSN is armed and is not the one
//     it names says so in its error (TxnError.SkipLSN), with the LSN to give.
//
// Streamed transactions are matched at Stream Commit (the spill file is
// dropped unreplayed); prepared ones at Begin Prepare / Stream Prepare by
// their prepare LSN, the LSN their errors name: the skipped one is
// committed empty instead of prepared, and its COMMIT PREPARED or ROLLBACK
// PREPARED then finds nothing prepared on the target and does nothing.
func decideSkip(flag, origin protocol.LSN, originName string, used *SkipUse) (protocol.LSN, string, error) {
	if flag == 0 {
		return 0, "", nil
	}
	if used != nil {
		what := fmt.Sprintf("was already used at %s (transaction xid %d skipped)", used.At.UTC().Format(time.RFC3339), used.Xid)
		if used.Passed {
			what = fmt.Sprintf("was passed without a match at %s (transaction xid %d, commit LSN %s, was the first applied after it)",
				used.At.UTC().Format(time.RFC3339), used.Xid, used.CommitLSN)
		}
		return 0, fmt.Sprintf("--skip-lsn %s %s; ignoring it — remove it from the flags/environment (WALAPPLY_SKIP_LSN)", flag, what), nil
	}
	if flag <= origin {
		return 0, "", &PermanentError{Err: fmt.Errorf("--skip-lsn %s is at or below the progress of replication origin %q on the target, %s: "+
			"everything up to there is applied already, so there is nothing to skip at that LSN; "+
			"remove the --skip-lsn flag (or the WALAPPLY_SKIP_LSN environment variable), and give the commit LSN that the next error names",
			flag, originName, origin)}
	}
	return flag, "", nil
}

// ArmSkip arms the applier with --skip-lsn flag, decided against the
// origin's progress and its recorded use (decideSkip); flag 0 disarms it.
func (a *Applier) ArmSkip(flag, origin protocol.LSN, originName string, used *SkipUse) error {
	a.skipLSN, a.skipIgnored = 0, 0
	if flag == 0 {
		return nil
	}
	arm, warning, err := decideSkip(flag, origin, originName, used)
	if err != nil {
		return err
	}
	if warning != "" {
		a.log.Warn().Stringer("skip_lsn", flag).Msg(warning)
		a.skipIgnored = flag
		if !used.Passed {
			a.skippedXid = used.Xid
		}
		return nil
	}
	a.log.Info().Stringer("skip_lsn", arm).Stringer("origin_lsn", origin).
		Msg("--skip-lsn: the source transaction with this commit LSN will be skipped, once")
	a.skipLSN = arm
	return nil
}

// skipMatches reports whether the transaction ending at commit (its commit
// or prepare LSN) is the one --skip-lsn names.
func (a *Applier) skipMatches(commit protocol.LSN) bool {
	return a.skipLSN != 0 && commit == a.skipLSN
}

// recordUserSkip records, inside the (empty) target transaction that moves
// the origin past it, that the transaction named by --skip-lsn was skipped;
// the skip is then used.
func (a *Applier) recordUserSkip() {
	a.log.Warn().Uint32("xid", a.txn.xid).Stringer("commit_lsn", a.txn.finalLSN).
		Msg("skipping the source transaction named by --skip-lsn: none of its changes are applied")
	a.Stats.Conflicts.Add(SkippedByUser)
	a.queueSkipRecord(SkippedByUser, "skipped", nil)
	a.skipLSN, a.skippedXid = 0, a.txn.xid
}

// notePassed spends an armed skip LSN that the transaction being applied,
// ending at commit, has gone past without meeting it. The record goes into
// the open target transaction.
func (a *Applier) notePassed(commit protocol.LSN) {
	if a.skipLSN == 0 || commit <= a.skipLSN {
		return
	}
	a.log.Warn().Stringer("skip_lsn", a.skipLSN).Uint32("xid", a.txn.xid).Stringer("commit_lsn", commit).
		Msg("--skip-lsn passed without a match: no source transaction has that commit LSN; nothing was skipped and the flag is spent — remove it")
	a.queueSkipRecord(SkipKindPassed, "applied", []byte(a.skipLSN.String()))
	a.skipIgnored, a.skipLSN = a.skipLSN, 0
}

// queueSkipRecord queues the walapply.conflicts row of a use of --skip-lsn
// for the open source transaction.
func (a *Applier) queueSkipRecord(kind, resolution string, key []byte) {
	var b strings.Builder
	sqlgen.RecordInsert(&b, kind, resolution, 1, "$3")
	a.params, a.formats = a.params[:0], a.formats[:0]
	a.appendRecordParams(&relmap.Entry{Rel: &protocol.Relation{}}, key)
	a.params[1] = nil // no relation
	if key == nil {
		a.params[2] = nil
	}
	a.sess.QueueExec(pipeline.Stmt{Op: pipeline.OpOrigin, Xid: a.txn.xid, CommitLSN: a.txn.finalLSN, FirstLSN: a.queue.FirstLSN}, b.String(), a.params, sqlgen.RecordOIDs, a.formats)
}

// skipHint fills in a failed transaction's error what --skip-lsn did.
func (a *Applier) skipHint(te *TxnError) {
	switch {
	case a.skipLSN != 0 && te.CommitLSN != a.skipLSN:
		te.SkipLSN = a.skipLSN
	case a.skipLSN == 0 && a.skipIgnored != 0 && te.CommitLSN != a.skipIgnored:
		te.SkipLSN, te.SkipSpent = a.skipIgnored, true
	}
}

// commitSkipped commits the empty target transaction of a prepared
// transaction skipped at its PREPARE, with the origin moved to its end,
// and waits for it, as prepareTxn does for a PREPARE TRANSACTION.
func (a *Applier) commitSkipped(ctx context.Context, end protocol.LSN, at protocol.Timestamp) error {
	a.recordUserSkip()
	a.queueOriginAdvance(end, at)
	a.sess.QueueSQL(pipeline.OpCommit, nil, "COMMIT")
	if failed, err := a.sess.Flush(ctx); err != nil {
		return a.failStmt(ctx, failed, err)
	}
	a.collect()
	a.tpApplied(end, at)
	return nil
}
