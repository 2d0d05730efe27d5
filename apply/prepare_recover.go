package apply

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/state"
	"github.com/walapply/walapply/twophase"
)

// originReleaseWait bounds how long a repair waits for the backend of a
// lost apply connection to release the origin.
const originReleaseWait = 30 * time.Second

// repairOrigin undoes an origin advance that a failed PREPARE TRANSACTION
// may have left behind: on PostgreSQL 16+ the abort of a transaction that
// had set the origin up advances it too, so the source would never send the
// transaction again (state's package doc). The origin is moved back to the
// last applied position unless the transaction turns out to be prepared
// (maybeDone: the connection was lost, so the PREPARE may have happened).
// On a live session the failed transaction has been rolled back already;
// on a lost one, the repair waits on a new connection for the old backend
// to release the origin.
//
// An error means the origin may be ahead of the target's data: it is
// permanent, so that the run stops rather than resume past the transaction.
func (a *Applier) repairOrigin(ctx context.Context, gid string, maybeDone bool) error {
	tp := &a.tp
	conn := a.sess.conn
	if a.sess.pg.IsClosed() {
		c, err := connectTarget(ctx, tp.cfg, "repair")
		if err != nil {
			// The target is unreachable: most likely it went down, and its
			// backends with it, before writing an abort record.
			a.log.Warn().Err(err).Str("gid", gid).Msg("cannot reach the target to check the origin after a failed PREPARE TRANSACTION")
			return nil
		}
		defer c.Close(context.WithoutCancel(ctx))
		if err := waitOriginFree(ctx, c, tp.origin); err != nil {
			return a.repairFailed(gid, err)
		}
		conn = c
	} else {
		if err := state.XactReset(ctx, conn); err != nil {
			return a.repairFailed(gid, err)
		}
		maybeDone = false
	}
	if maybeDone {
		prepared, err := twophase.IsPrepared(ctx, conn, gid)
		if err != nil {
			return a.repairFailed(gid, err)
		}
		if prepared {
			a.log.Info().Str("gid", gid).Msg("the connection was lost after PREPARE TRANSACTION took effect; the transaction is prepared on the target")
			return nil
		}
	}
	lsn, _, err := state.OriginProgress(ctx, conn, tp.origin, false)
	if err != nil {
		return a.repairFailed(gid, err)
	}
	if lsn <= a.applied {
		if conn != a.sess.conn {
			return a.repairFailed(gid, state.SessionReset(ctx, conn))
		}
		return nil
	}
	if err := state.SessionReset(ctx, conn); err != nil {
		return a.repairFailed(gid, err)
	}
	if err := state.AdvanceOrigin(ctx, conn, tp.origin, a.applied); err != nil {
		return a.repairFailed(gid, err)
	}
	if conn == a.sess.conn {
		if err := state.SessionSetup(ctx, conn, tp.origin); err != nil {
			return a.repairFailed(gid, err)
		}
	}
	a.log.Warn().Str("gid", gid).Stringer("from", lsn).Stringer("to", a.applied).
		Msg("moved the origin back after a failed PREPARE TRANSACTION (PostgreSQL 16+ advances it on abort); the source sends the transaction again")
	return nil
}

func (a *Applier) repairFailed(gid string, err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{fmt.Errorf("after a failed PREPARE TRANSACTION %s, checking the target's origin %q: %w; it may be past the transaction, which would then be lost: "+
		"compare pg_replication_origin_progress(%s, false) on the target with the last transaction applied (%s), move it back with pg_replication_origin_advance if needed, then restart",
		twophase.QuoteGID(gid), a.tp.origin, err, twophase.QuoteGID(a.tp.origin), a.applied)}
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

// findLeftovers lists the applier's prepared transactions on the target. Those
// the source still has prepared wait for their outcome; the others are kept
// to be reported once the stream has passed the source's current position
// without finishing them (checkLeftovers).
func (s *session) findLeftovers(ctx context.Context) error {
	tp := &s.applier.tp
	mine, err := twophase.ListApplier(ctx, s.control, s.cfg.Name)
	if err != nil || len(mine) == 0 {
		return err
	}
	if tp.mode == twophase.GIDModeSource {
		// Outcomes are looked up under the source's GIDs now: nothing will
		// finish these.
		for _, p := range mine {
			s.cfg.Logger.Warn().Str("gid", p.GID).Uint32("source_xid", p.SourceXid).Time("prepared_at", p.Prepared).
				Msg("prepared on the target under a GID of --gid-mode applier, which --gid-mode source does not finish: " +
					"run with --gid-mode applier until it is finished, or finish it by hand")
		}
		return nil
	}
	onSource, pos, err := sourcePrepared(ctx, s.source)
	if err != nil {
		return err
	}
	tp.leftovers, tp.leftoversUntil = map[string]uint32{}, pos
	for _, p := range mine {
		if onSource[p.SourceXid] {
			s.cfg.Logger.Info().Str("gid", p.GID).Uint32("source_xid", p.SourceXid).Time("prepared_at", p.Prepared).
				Msg("prepared on the target; waiting for its outcome from the source")
			continue
		}
		tp.leftovers[p.GID] = p.SourceXid
	}
	return nil
}

// checkLeftovers reports the prepared transactions that findLeftovers found
// and that are still prepared once the stream has passed the position at
// which the source no longer had them prepared: their outcome is behind the
// slot, and nothing will finish them. Called from the feedback round.
func (s *session) checkLeftovers(ctx context.Context) {
	tp := &s.applier.tp
	if len(tp.leftovers) == 0 || s.serverWALEnd < tp.leftoversUntil {
		return
	}
	still, err := twophase.ListApplier(ctx, s.control, s.cfg.Name)
	if err != nil {
		s.cfg.Logger.Debug().Err(err).Msg("checking for leftover prepared transactions")
		return
	}
	for _, p := range still {
		if _, ok := tp.leftovers[p.GID]; !ok {
			continue
		}
		s.cfg.Logger.Warn().Str("gid", p.GID).Uint32("source_xid", p.SourceXid).Time("prepared_at", p.Prepared).Str("database", p.Database).
			Msg("leftover prepared transaction: prepared on the target by this applier, no longer prepared on the source, and its outcome is not in the stream " +
				"(slot recreated or origin moved?); walapply never finishes it on its own: check the source, then COMMIT PREPARED or ROLLBACK PREPARED it on the target")
	}
	tp.leftovers = nil
}

// sourcePrepared returns the top-level xids of the transactions prepared in
// the source database, and the source's WAL position when they were read.
func sourcePrepared(ctx context.Context, src *protocol.ReplConn) (map[uint32]bool, protocol.LSN, error) {
	res, err := src.PgConn().Exec(ctx, `SELECT (CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.pg_last_wal_replay_lsn() ELSE pg_catalog.pg_current_wal_lsn() END)::text, NULL
		UNION ALL SELECT NULL, transaction::text FROM pg_catalog.pg_prepared_xacts WHERE database = pg_catalog.current_database()`).ReadAll()
	if err != nil {
		return nil, 0, fmt.Errorf("listing the prepared transactions on the source: %w", err)
	}
	out := map[uint32]bool{}
	var pos protocol.LSN
	for _, r := range res {
		for _, row := range r.Rows {
			if len(row) != 2 {
				continue
			}
			if row[0] != nil {
				if pos, err = protocol.ParseLSN(string(row[0])); err != nil {
					return nil, 0, fmt.Errorf("listing the prepared transactions on the source: %w", err)
				}
			}
			if row[1] != nil {
				xid, err := strconv.ParseUint(string(row[1]), 10, 32)
				if err != nil {
					return nil, 0, fmt.Errorf("listing the prepared transactions on the source: xid %q: %w", row[1], err)
				}
				out[uint32(xid)] = true
			}
		}
	}
	return out, pos, nil
}

// sourceSetting reads an integer setting of the source.
func sourceSetting(ctx context.Context, src *protocol.ReplConn, name string) (int, error) {
	res, err := src.PgConn().Exec(ctx, "SELECT pg_catalog.current_setting('"+name+"')").ReadAll()
	if err != nil {
		return 0, err
	}
	if len(res) != 1 || len(res[0].Rows) != 1 || len(res[0].Rows[0]) != 1 {
		return 0, fmt.Errorf("reading %s on the source: unexpected result", name)
	}
	return strconv.Atoi(string(res[0].Rows[0][0]))
}
