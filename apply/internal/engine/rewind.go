package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/state"
	"github.com/walapply/walapply/twophase"
)

// originReleaseWait bounds how long a rewind waits for the backend of a
// lost apply connection to release the origin.
const originReleaseWait = 30 * time.Second

// rewindOrigin undoes an origin advance that a failed COMMIT (gid empty) or
// PREPARE TRANSACTION gid may have left behind: on PostgreSQL 16+ the abort
// of a transaction that had set the origin up advances it too, so the
// source would never send the failed transactions again (state's package
// doc). The origin is moved back to the last applied position
// (state.RewindOrigin). It runs once per failed transaction, after the
// rollback.
//
// On a live session the failed transaction has been rolled back already.
// On a lost one, a failed COMMIT cannot be repaired here (its backend may
// still hold the origin; that window, between the last two messages of a
// batch, is documented in state's package doc); a failed PREPARE is: the
// rewind waits on a new connection for the old backend to release the
// origin, and leaves the origin alone if the transaction turns out to be
// prepared (maybeDone: the connection was lost, so the PREPARE may have
// happened).
//
// An error means the origin may be ahead of the target's data: it is
// permanent, so that the run stops rather than resume past the transaction.
func (a *Applier) rewindOrigin(ctx context.Context, gid string, maybeDone bool) error {
	origin := a.sess.OriginName()
	if origin == "" {
		return nil
	}
	var from protocol.LSN
	if a.sess.Lost() {
		if gid == "" {
			return nil
		}
		var done bool
		var err error
		if from, done, err = a.rewindOnNewConn(ctx, origin, gid, maybeDone); done || err != nil {
			return err
		}
	} else {
		if gid != "" {
			if err := a.sess.XactReset(ctx); err != nil {
				return a.rewindFailed(gid, err)
			}
		}
		var err error
		if from, err = a.sess.RewindOrigin(ctx, a.applied); err != nil {
			return a.rewindFailed(gid, err)
		}
	}
	if from > a.applied {
		ev := a.log.Warn()
		if gid != "" {
			ev = ev.Str("gid", gid)
		}
		ev.Stringer("from", from).Stringer("to", a.applied).
			Msg("moved the origin back after a failed " + failedWhat(gid) + " (PostgreSQL 16+ advances it on abort); the source sends the transaction again")
	}
	return nil
}

// rewindOnNewConn is rewindOrigin after a failed PREPARE on a lost
// connection: it waits on a new one for the old backend to release the
// origin and rewinds it there, unless the transaction turns out to be
// prepared (maybeDone). done means there is nothing more to do.
func (a *Applier) rewindOnNewConn(ctx context.Context, origin, gid string, maybeDone bool) (from protocol.LSN, done bool, err error) {
	c, err := a.tp.dial.Target(ctx, "repair")
	if err != nil {
		// The target is unreachable: most likely it went down, and its
		// backends with it, before writing an abort record.
		a.log.Warn().Err(err).Str("gid", gid).Msg("cannot reach the target to check the origin after a failed PREPARE TRANSACTION")
		return 0, true, nil
	}
	defer c.Close(context.WithoutCancel(ctx))
	if err := waitOriginFree(ctx, c, origin); err != nil {
		return 0, true, a.rewindFailed(gid, err)
	}
	if maybeDone {
		prepared, err := twophase.IsPrepared(ctx, c, gid)
		if err != nil {
			return 0, true, a.rewindFailed(gid, err)
		}
		if prepared {
			a.log.Info().Str("gid", gid).Msg("the connection was lost after PREPARE TRANSACTION took effect; the transaction is prepared on the target")
			return 0, true, nil
		}
	}
	from, err = state.RewindOrigin(ctx, c, origin, a.applied, false)
	if err != nil {
		return 0, true, a.rewindFailed(gid, err)
	}
	return from, false, nil
}

// failedWhat names the statement whose failure rewindOrigin repairs.
func failedWhat(gid string) string {
	if gid == "" {
		return "COMMIT"
	}
	return "PREPARE TRANSACTION " + twophase.QuoteGID(gid)
}

func (a *Applier) rewindFailed(gid string, err error) error {
	return &PermanentError{Err: fmt.Errorf("after a failed %s, checking the target's origin %q: %w; it may be past transactions that were not applied, which would then be lost: "+
		"compare pg_replication_origin_progress(%s, false) on the target with the last transaction applied (%s), move it back with pg_replication_origin_advance if needed, then restart",
		failedWhat(gid), a.sess.OriginName(), err, twophase.QuoteGID(a.sess.OriginName()), a.applied)}
}

// waitOriginFree sets the origin up on conn, waiting for the session that
// holds it to end.
func waitOriginFree(ctx context.Context, conn *pgx.Conn, origin string) error {
	deadline := time.Now().Add(originReleaseWait)
	for {
		err := state.SessionSetup(ctx, conn, origin)
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "55006" || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
