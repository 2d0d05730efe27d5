package apply

import (
	"context"
	"fmt"
	"strconv"

	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/twophase"
)

// checkTwoPhaseConfig validates Config.TwoPhase and Config.GIDMode; whether
// the source and the target can do it is checked at connect.
func checkTwoPhaseConfig(cfg *Config) error {
	switch cfg.GIDMode {
	case twophase.GIDModeApplier, twophase.GIDModeSource:
	default:
		return fmt.Errorf("%w: unknown GID mode %v: want applier or source", ErrConfig, cfg.GIDMode)
	}
	if !cfg.TwoPhase {
		return nil
	}
	if _, err := twophase.TargetGID(cfg.GIDMode, cfg.Name, 1, ""); cfg.GIDMode == twophase.GIDModeApplier && err != nil {
		return fmt.Errorf("%w: applier name %q cannot name prepared transactions: %v", ErrConfig, cfg.Name, err)
	}
	return nil
}

// minTwoPhaseSource is the first source version with two-phase decoding
// (pgoutput protocol 3).
const minTwoPhaseSource = 150000

// prepareTwoPhase readies the session for two-phase transactions: it says
// whether the slot still has to be switched to two-phase decoding
// (START_REPLICATION with two_phase does that, for good), prepares the
// statements and looks for prepared transactions an earlier run left on the
// target.
func (s *session) prepareTwoPhase(ctx context.Context) error {
	cfg := s.cfg
	if !cfg.TwoPhase {
		return nil
	}
	log := cfg.Logger
	// The preflight checked the source's version and the target's
	// max_prepared_transactions (checkTwoPhase).
	maxTarget := s.facts.maxPrepared
	if maxSource, err := sourceSetting(ctx, s.source, "max_prepared_transactions"); err != nil {
		log.Debug().Err(err).Msg("reading max_prepared_transactions on the source")
	} else if maxSource > maxTarget {
		log.Warn().Int("source", maxSource).Int("target", maxTarget).
			Msg("the target allows fewer prepared transactions than the source: raise max_prepared_transactions on the target, or applying stops when the source has more transactions prepared at once")
	}
	st, found, err := s.source.Slot(ctx, cfg.Slot)
	if err != nil {
		return fmt.Errorf("looking up replication slot %q on the source: %w", cfg.Slot, err)
	}
	if found && !st.TwoPhase {
		log.Info().Str("slot", cfg.Slot).Msg("enabling two-phase decoding on the slot (it stays enabled): " +
			"transactions prepared from now on are sent at PREPARE, those prepared earlier at their COMMIT PREPARED")
	}

	if err := s.applier.EnableTwoPhase(ctx, cfg.GIDMode, cfg.Name, configDialer{cfg}); err != nil {
		return err
	}
	return s.findLeftovers(ctx)
}

// findLeftovers looks for the applier's prepared transactions that an
// earlier run left on the target (twophase.FindLeftovers).
func (s *session) findLeftovers(ctx context.Context) error {
	l, err := twophase.FindLeftovers(ctx, s.control, s.source.PgConn(), s.cfg.Name, s.applier.TwoPhaseMode(), s.cfg.Logger)
	s.applier.SetLeftovers(l)
	return err
}

// checkLeftovers reports those still prepared once the stream has passed
// the source's position at connect (twophase.Leftovers.Check). Called from
// the feedback round.
func (s *session) checkLeftovers(ctx context.Context) {
	s.applier.Leftovers().Check(ctx, s.control, s.serverWALEnd)
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
