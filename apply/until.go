package apply

import (
	"context"
	"fmt"

	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/state"
)

// UntilReached is where a run stopped by Config.Until stopped.
//
// Stopping at a position (Config.Until, walapply run --until): the
// cut-over of a migration. The applier applies every source transaction
// whose commit LSN (the LSN Begin names, the one errors and --skip-lsn use;
// the prepare LSN for a prepared transaction) is at or before Until, and
// none after it, then stops cleanly with all of it durable on the target.
// It is pg_recvlogical's --endpos rule.
//
// Two events end the run. A transaction that commits past Until: it is not
// applied, and the group open before it is committed first (pastUntil).
// Or the stream passing Until outside a transaction: the walsender sends
// in commit order, so once a message or keepalive names a position at or
// past Until, every transaction committed at or before it has been sent
// (untilReached); that is also how an idle source ends the run, for which
// feedback asks the walsender for a keepalive while Until is pending.
//
// UntilNow resolves to the source's pg_current_wal_lsn() when the run
// starts; UntilNowRequests asks for the same while running (walapply run
// on SIGUSR1), the earlier of two positions winning. The position asked
// for and the time it was reached are recorded in walapply.appliers
// (until_lsn, until_reached_at) for status.
type UntilReached struct {
	// Until is the position asked for (for UntilNow, as resolved).
	Until protocol.LSN
	// Applied is the target's durable progress: the end LSN of the last
	// source transaction applied, at or before Until's commit (or the
	// progress the run started from, when there was nothing to apply).
	Applied protocol.LSN
}

// resolveUntil reads the source's current LSN for UntilNow, once per run
// (a retried session keeps the position), and records the run's stop
// position in walapply.appliers.
func (s *session) resolveUntil(ctx context.Context) error {
	cfg := s.cfg
	if cfg.UntilNow && cfg.Until == 0 {
		lsn, err := s.sourceCurrentLSN(ctx)
		if err != nil {
			return err
		}
		cfg.Until = lsn
		cfg.Logger.Info().Stringer("until_lsn", lsn).Msg("--until now: stopping once the source's current position is applied")
	}
	var until any // NULL without --until
	if cfg.Until != 0 {
		until = cfg.Until.String()
	}
	if _, err := s.control.Exec(ctx, `UPDATE walapply.appliers SET until_lsn = $2::pg_lsn, until_reached_at = NULL WHERE name = $1`, cfg.Name, until); err != nil {
		return fmt.Errorf("recording the --until position of applier %q in walapply.appliers on the target: %w", cfg.Name, err)
	}
	return nil
}

// sourceCurrentLSN is pg_current_wal_lsn() on the source, read on the
// replication connection before streaming starts, on a connection of its
// own while streaming.
func (s *session) sourceCurrentLSN(ctx context.Context) (protocol.LSN, error) {
	var text string
	if s.stream == nil {
		res, err := s.source.PgConn().Exec(ctx, "SELECT pg_catalog.pg_current_wal_lsn()::text").ReadAll()
		if err != nil {
			return 0, fmt.Errorf("reading the source's current LSN for --until now: %w", err)
		}
		if len(res) != 1 || len(res[0].Rows) != 1 {
			return 0, fmt.Errorf("reading the source's current LSN for --until now: no row")
		}
		text = string(res[0].Rows[0][0])
	} else {
		conn, err := connectSource(ctx, s.cfg, "until")
		if err != nil {
			return 0, err
		}
		defer conn.Close(ctx)
		if err := conn.QueryRow(ctx, "SELECT pg_catalog.pg_current_wal_lsn()::text").Scan(&text); err != nil {
			return 0, fmt.Errorf("reading the source's current LSN for an \"until now\" request: %w", err)
		}
	}
	return protocol.ParseLSN(text)
}

// pollUntilNow takes an "until now" request, if one is waiting
// (Config.UntilNowRequests).
func (s *session) pollUntilNow(ctx context.Context) error {
	select {
	case <-s.cfg.UntilNowRequests:
	default:
		return nil
	}
	lsn, err := s.sourceCurrentLSN(ctx)
	if err != nil {
		return err
	}
	if s.cfg.Until != 0 && s.cfg.Until < lsn {
		s.cfg.Logger.Info().Stringer("until_lsn", s.cfg.Until).Stringer("current_lsn", lsn).Msg("asked to stop at the source's current position: the earlier --until position stays")
		return nil
	}
	s.cfg.Until = lsn
	s.cfg.Logger.Info().Stringer("until_lsn", lsn).Msg("asked to stop at the source's current position")
	if _, err := s.control.Exec(ctx, `UPDATE walapply.appliers SET until_lsn = $2::pg_lsn, until_reached_at = NULL WHERE name = $1`, s.cfg.Name, lsn.String()); err != nil {
		return fmt.Errorf("recording the --until position of applier %q in walapply.appliers on the target: %w", s.cfg.Name, err)
	}
	return nil
}

// pastUntil reports whether msg begins a transaction that commits after
// Until (or finishes a prepared one after it): it must not be applied.
func (s *session) pastUntil(msg protocol.Message) bool {
	until := s.cfg.Until
	if until == 0 {
		return false
	}
	var lsn protocol.LSN
	switch m := msg.(type) {
	case *protocol.Begin:
		lsn = m.FinalLSN
	case *protocol.BeginPrepare:
		lsn = m.PrepareLSN
	case *protocol.CommitPrepared:
		lsn = m.CommitLSN
	case *protocol.RollbackPrepared:
		lsn = m.RollbackEndLSN
	case *protocol.StreamCommit:
		lsn = m.CommitLSN
	case *protocol.StreamPrepare:
		lsn = m.PrepareLSN
	default:
		return false
	}
	return lsn > until
}

// untilReached reports whether the stream has passed Until outside a
// source transaction: nothing at or before it is still to come.
func (s *session) untilReached() bool {
	if s.cfg.Until == 0 {
		return false
	}
	if s.untilPassed {
		return true
	}
	if s.applier.InTransaction() || s.applier.InStreamBlock() {
		return false
	}
	applied, _ := s.applier.Applied()
	return max(s.serverWALEnd, applied) >= s.cfg.Until
}

// untilWaiting: feedback asks the walsender for a keepalive, so that an
// idle source tells how far it is.
func (s *session) untilWaiting() bool {
	return s.cfg.Until != 0 && s.applier != nil && !s.applier.Pending()
}

// stopAtUntil ends a run that reached Until: it commits the open group,
// makes the origin's progress durable (the target commits with
// synchronous_commit off), records the stop and reports it. close() then
// confirms the position to the source.
func (s *session) stopAtUntil(ctx context.Context) error {
	cfg := s.cfg
	if applied, _ := s.applier.Applied(); !s.progressed && applied > cfg.Until {
		// Nothing applied in this session, and the target was already
		// past the position: an initial copy whose snapshot is later, or
		// an earlier run that went further.
		cfg.Logger.Warn().Stringer("until_lsn", cfg.Until).Stringer("applied_lsn", applied).
			Msg("the target already held source changes past the --until position when this session started; it cannot go back")
	}
	if err := s.commitAndSettle(ctx); err != nil {
		return err
	}
	lsn, _, err := state.OriginProgress(ctx, s.control, s.origin, true)
	if err != nil {
		return fmt.Errorf("flushing the progress of origin %q on the target: %w", s.origin, err)
	}
	s.tracker.Durable(lsn)
	if _, err := s.control.Exec(ctx, `UPDATE walapply.appliers SET until_reached_at = now() WHERE name = $1`, cfg.Name); err != nil {
		return fmt.Errorf("recording that applier %q reached its --until position in walapply.appliers on the target: %w", cfg.Name, err)
	}
	cfg.Logger.Info().Stringer("until_lsn", cfg.Until).Stringer("applied_lsn", lsn).
		Msg("reached the --until position: every source transaction committed at or before it is applied and durable; stopping")
	if cfg.OnUntilReached != nil {
		cfg.OnUntilReached(UntilReached{Until: cfg.Until, Applied: lsn})
	}
	return nil
}
