package twophase

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/rs/zerolog"

	"github.com/walapply/walapply/protocol"
)

// Leftovers is restart recovery of an applier's prepared transactions (see
// Recovery in the package documentation). At connect, FindLeftovers lists
// the applier's prepared transactions on the target: those the source still
// has prepared wait for their outcome; the others are expected to be
// finished by an outcome still ahead in the stream. Once the stream has
// passed the source's WAL position at connect, Check reports any that are
// still prepared in the log, never committing or rolling them back: only an
// operator can tell what they should become. A nil *Leftovers has nothing
// to report.
type Leftovers struct {
	applier string
	log     zerolog.Logger
	// gids maps the target GID of each transaction to report to its source
	// xid; until is the source's WAL position when they were listed.
	gids  map[string]uint32
	until protocol.LSN
}

// FindLeftovers lists applier's prepared transactions on target (in
// GIDModeApplier) and the transactions prepared in source's database,
// logging those that wait for their outcome, and returns what Check is to
// report later (nil when nothing). In GIDModeSource nothing will finish the
// GIDModeApplier transactions found: they are reported at once. source is
// the replication connection (simple protocol only).
func FindLeftovers(ctx context.Context, target Querier, source *pgconn.PgConn, applier string, mode Mode, log zerolog.Logger) (*Leftovers, error) {
	mine, err := ListApplier(ctx, target, applier)
	if err != nil || len(mine) == 0 {
		return nil, err
	}
	if mode == GIDModeSource {
		// Outcomes are looked up under the source's GIDs now: nothing will
		// finish these.
		for _, p := range mine {
			log.Warn().Str("gid", p.GID).Uint32("source_xid", p.SourceXid).Time("prepared_at", p.Prepared).
				Msg("prepared on the target under a GID of --gid-mode applier, which --gid-mode source does not finish: " +
					"run with --gid-mode applier until it is finished, or finish it by hand")
		}
		return nil, nil
	}
	onSource, pos, err := sourcePrepared(ctx, source)
	if err != nil {
		return nil, err
	}
	l := &Leftovers{applier: applier, log: log, gids: map[string]uint32{}, until: pos}
	for _, p := range mine {
		if onSource[p.SourceXid] {
			log.Info().Str("gid", p.GID).Uint32("source_xid", p.SourceXid).Time("prepared_at", p.Prepared).
				Msg("prepared on the target; waiting for its outcome from the source")
			continue
		}
		l.gids[p.GID] = p.SourceXid
	}
	return l, nil
}

// Finished drops gid from the transactions to report: its outcome came.
func (l *Leftovers) Finished(gid string) {
	if l != nil {
		delete(l.gids, gid)
	}
}

// Check reports, once walEnd (the source's WAL end the stream has reached)
// is at or past the source's position at FindLeftovers, the transactions
// still prepared on target: their outcome is behind the slot, and nothing
// will finish them. After a report there is nothing more to check; a failed
// lookup is logged at debug level and tried again at the next call. Called
// from the run loop's feedback round.
func (l *Leftovers) Check(ctx context.Context, target Querier, walEnd protocol.LSN) {
	if l == nil || len(l.gids) == 0 || walEnd < l.until {
		return
	}
	still, err := ListApplier(ctx, target, l.applier)
	if err != nil {
		l.log.Debug().Err(err).Msg("checking for leftover prepared transactions")
		return
	}
	for _, p := range still {
		if _, ok := l.gids[p.GID]; !ok {
			continue
		}
		l.log.Warn().Str("gid", p.GID).Uint32("source_xid", p.SourceXid).Time("prepared_at", p.Prepared).Str("database", p.Database).
			Msg("leftover prepared transaction: prepared on the target by this applier, no longer prepared on the source, and its outcome is not in the stream " +
				"(slot recreated or origin moved?); walapply never finishes it on its own: check the source, then COMMIT PREPARED or ROLLBACK PREPARED it on the target")
	}
	l.gids = nil
}

// sourcePrepared returns the top-level xids of the transactions prepared in
// the source database, and the source's WAL position when they were read
// (its replay position on a standby).
func sourcePrepared(ctx context.Context, src *pgconn.PgConn) (map[uint32]bool, protocol.LSN, error) {
	res, err := src.Exec(ctx, `SELECT (CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.pg_last_wal_replay_lsn() ELSE pg_catalog.pg_current_wal_lsn() END)::text, NULL
		UNION ALL SELECT NULL, transaction::text FROM pg_catalog.pg_prepared_xacts WHERE database = pg_catalog.current_database()`).ReadAll()
	if err != nil {
		return nil, 0, fmt.Errorf("twophase: listing the prepared transactions on the source: %w", err)
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
					return nil, 0, fmt.Errorf("twophase: listing the prepared transactions on the source: %w", err)
				}
			}
			if row[1] != nil {
				xid, err := strconv.ParseUint(string(row[1]), 10, 32)
				if err != nil {
					return nil, 0, fmt.Errorf("twophase: listing the prepared transactions on the source: xid %q: %w", row[1], err)
				}
				out[uint32(xid)] = true
			}
		}
	}
	return out, pos, nil
}
