package apply

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/protocol"
)

// checkFailover: --failover needs a PostgreSQL 17 source; a source in
// recovery whose slot is a synchronised copy is not streamed from (yet);
// a source string with several hosts but without target_session_attrs
// may land on a standby, which is said once per start.
//
// Failover slots and multi-host sources (PostgreSQL 17+).
//
// A slot created with --failover is synchronised by standbys running with
// sync_replication_slots = on; with synchronized_standby_slots naming the
// standbys' physical slots on the primary, no change reaches walapply
// before those standbys have flushed it, so a promoted standby has
// everything walapply applied and the slot to continue from (its
// confirmed position may trail the primary's: what is sent again is below
// the origin's progress, which the walsender and the applier skip). The
// timeline check (timeline.go) is what proves it at the next start.
//
// The source connection string may list several hosts (libpq's
// "postgres://h1:5432,h2:5432/db?target_session_attrs=read-write"); pgx
// tries them in order and, with target_session_attrs read-write or
// primary, keeps only the one that accepts writes, for the replication
// connection (protocol.ConnectReplication: the walsender answers SHOW
// transaction_read_only) and every SQL connection alike, all of which are
// opened from Config.Source. After a promotion the session's connections
// break, Run reconnects (transient error), and the same string then finds
// the new primary.
func checkFailover(ctx context.Context, s *session, f *preflightFacts) ([]error, error) {
	cfg := s.cfg
	if pc, err := pgconn.ParseConfig(cfg.Source); err == nil && pc.ValidateConnect == nil && severalHosts(pc) {
		cfg.Logger.Warn().Msg("the source connection string lists several hosts but no target_session_attrs: walapply connects to the first that answers, " +
			"which may be a standby; add target_session_attrs=read-write (or primary) so that it always finds the primary")
	}
	if f.slotFound && f.slot.Synced {
		res, err := s.source.PgConn().Exec(ctx, `SELECT pg_catalog.pg_is_in_recovery()`).ReadAll()
		if err != nil {
			return nil, fmt.Errorf("asking the source whether it is a standby: %w", err)
		}
		if len(res) == 1 && len(res[0].Rows) == 1 && string(res[0].Rows[0][0]) == "t" {
			return nil, fmt.Errorf("%w: replication slot %q on this source host is a copy synchronised from the primary, and it can be streamed from only once this standby is promoted; "+
				"retrying. Point --source at the primary, or list every host with target_session_attrs=read-write", ErrSourceIsStandby, cfg.Slot)
		}
	}
	if !cfg.Failover {
		return nil, nil
	}
	if f.version < protocol.MinFailoverVersion {
		return []error{fmt.Errorf("%w: --failover needs PostgreSQL 17 or later on the source, which is %s: "+
			"before 17 a logical slot is not synchronised to standbys; run without --failover", ErrNotSupported, versionString(f.version))}, nil
	}
	if cfg.TwoPhase && f.version < 180000 {
		// Checked on 17.10: it accepts both options on one slot, but its
		// slot synchronisation copies two_phase without two_phase_at
		// (18 copies both).
		cfg.Logger.Warn().Str("slot", cfg.Slot).Msg("--failover with --two-phase on PostgreSQL 17: the server accepts both, but its standbys copy the slot's two_phase flag " +
			"without two_phase_at, the position from which prepared transactions are decoded at PREPARE (synchronised from 18 on, where failover with two-phase is tested)")
	}
	return nil, nil
}

// severalHosts reports whether a parsed connection string names more than
// one host (pgconn adds fallbacks of the same host for sslmode=prefer).
func severalHosts(pc *pgconn.Config) bool {
	for _, fb := range pc.Fallbacks {
		if fb.Host != pc.Host || fb.Port != pc.Port {
			return true
		}
	}
	return false
}

// slotOptions are the options of the applier's slot when walapply creates
// it (ensureSlot, and the initial copy).
func slotOptions(cfg *Config, snapshot string) protocol.SlotOptions {
	return protocol.SlotOptions{TwoPhase: cfg.TwoPhase, Failover: cfg.Failover, Snapshot: snapshot}
}

// ensureFailover turns failover on for an existing slot created without it
// when --failover asks for it.
func (s *session) ensureFailover(ctx context.Context, st protocol.SlotStatus) error {
	if !s.cfg.Failover || st.Failover {
		return nil
	}
	if err := s.source.EnableFailover(ctx, s.cfg.Slot); err != nil {
		return err
	}
	s.cfg.Logger.Info().Str("slot", s.cfg.Slot).Msg("enabled failover on the replication slot (--failover)")
	return nil
}
