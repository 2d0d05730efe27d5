package apply

import (
	"context"
	"fmt"
	"strconv"

	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/twophase"
)

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
