package engine

import (
	"context"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/state"
	"github.com/walapply/walapply/twophase"
)

// twoPhaseState is the applier's part in two-phase transactions.
//
// Two-phase transactions.
//
// With --two-phase the source sends a prepared transaction when it is
// prepared (Begin Prepare, changes, Prepare; or Stream Prepare for one that
// was streamed) and its outcome later (Commit Prepared, Rollback Prepared).
// The applier reproduces both steps on the target, as PostgreSQL's
// subscriber does (worker.c, apply_handle_prepare and friends):
//
//   - Begin Prepare opens a target transaction like Begin; the changes go
//     into it; Prepare ends it with the origin set up to the Prepare's end
//     LSN as its last statement and PREPARE TRANSACTION under the target
//     GID (twophase.TargetGID: derived from the applier's name and the
//     source xid unless --gid-mode source). The origin advances with the
//     PREPARE, so after a restart the source sends only the outcome.
//   - Commit Prepared / Rollback Prepared set the origin up alone on the
//     apply session (they cannot run in a transaction block) and then run
//     COMMIT PREPARED / ROLLBACK PREPARED, whose record advances the origin
//     to the outcome's end LSN. Both steps are one round trip each; the
//     setup only happens when the GID is prepared on the target.
//   - An outcome whose GID is not prepared on the target is not an error:
//     either it was finished before a restart (the origin is past it), or
//     the source never sent its PREPARE (a transaction with no decoded
//     changes, or one prepared before two-phase decoding was enabled on
//     the slot, whose rollback the source still reports).
//   - An empty prepared transaction that the source does send (its changes
//     were all to unpublished tables) is prepared empty and finished by its
//     outcome, as PostgreSQL's subscriber does: nothing stays prepared.
//
// Exactly once (DESIGN.md invariant 1). A Begin Prepare is skipped as
// already applied only when its prepare LSN is below the applied position
// AND its GID is prepared on the target. The LSN alone is not enough: when
// two-phase decoding is enabled on an existing slot, a transaction prepared
// before that is sent whole at its COMMIT PREPARED, Begin Prepare included,
// with a prepare LSN far behind the position already applied.
//
// Aborts advance the origin (state's package doc). The origin setup before
// PREPARE TRANSACTION is skipped when the GID is in use, which is what makes
// PREPARE fail in practice; for any other failure after the setup (the
// connection lost during PREPARE, the prepared-transaction slots taken by
// another client in between), rewindOrigin moves the origin back to the last
// applied position unless the PREPARE is found to have happened.
//
// Leftovers. At connect, the applier's prepared transactions on the target
// are listed; those the source no longer has prepared are expected to be
// finished by an outcome still ahead in the stream. Once the stream has
// passed the source's position at connect, any that remain are reported in
// the log, never committed or rolled back by walapply: only an operator can
// tell what they should become (twophase.Leftovers).
type twoPhaseState struct {
	on   bool
	mode twophase.Mode
	name string // the applier's name, for GIDs
	dial Dialer // for a repair connection (rewindOnNewConn)

	// setupUnless is state.XactSetupUnlessPreparedSQL, prepared.
	setupUnless *pgconn.StatementDescription
	// gid is the target GID of the transaction being prepared; open says
	// that a Begin Prepare has come and its Prepare not yet.
	gid  string
	open bool
	// prepared holds the GIDs prepared by this session and not finished
	// yet, to tell an outcome whose transaction vanished from one that
	// never reached the target.
	prepared map[string]bool

	// leftovers: the applier's prepared transactions found on the target
	// at connect, to report if nothing finishes them (session_twophase.go).
	leftovers *twophase.Leftovers
}

// EnableTwoPhase sets the applier up for two-phase transactions, with
// GIDs made in mode for the applier called name; dial makes
// rewindOnNewConn's repair connection.
func (a *Applier) EnableTwoPhase(ctx context.Context, mode twophase.Mode, name string, dial Dialer) error {
	setup, err := a.sess.Prepare(ctx, state.XactSetupUnlessPreparedSQL, nil)
	if err != nil {
		return err
	}
	a.tp = twoPhaseState{on: true, mode: mode, name: name, dial: dial,
		setupUnless: setup, prepared: map[string]bool{}}
	return nil
}

// handleTwoPhase acts on the events of two-phase transactions.
func (a *Applier) handleTwoPhase(ctx context.Context, ev Event, msg protocol.Message) error {
	if !a.tp.on {
		return OrderError("%s message, but two-phase decoding was not asked for", msg.Type())
	}
	switch m := msg.(type) {
	case *protocol.BeginPrepare:
		return a.beginPrepare(ctx, m)
	case *protocol.Prepare:
		return a.prepare(ctx, m)
	case *protocol.CommitPrepared:
		return a.finishPrepared(ctx, finish{commit: true, xid: m.Xid, sourceGID: m.GID, start: m.CommitLSN, end: m.EndLSN, at: m.CommitTime})
	case *protocol.RollbackPrepared:
		return a.finishPrepared(ctx, finish{xid: m.Xid, sourceGID: m.GID, end: m.RollbackEndLSN, at: m.RollbackTime,
			prepareEnd: m.PrepareEndLSN, prepareTime: m.PrepareTime})
	case *protocol.StreamPrepare:
		return a.streamPrepare(ctx, m)
	}
	return OrderError("unexpected %s for two-phase transactions", ev)
}
