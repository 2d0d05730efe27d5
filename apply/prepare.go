package apply

import (
	"context"
	"fmt"

	"github.com/walapply/walapply/protocol"
)

// checkTwoPhaseConfig validates Config.TwoPhase.
func checkTwoPhaseConfig(cfg *Config) error {
	if cfg.TwoPhase {
		return fmt.Errorf("%w: --two-phase: applying prepared transactions is not yet supported by this version; run without it (prepared transactions then arrive at COMMIT PREPARED)", ErrNotSupported)
	}
	return nil
}

// prepareTwoPhase readies the session for two-phase transactions.
func (s *session) prepareTwoPhase(ctx context.Context) error { return nil }

// handleTwoPhase acts on the events of two-phase transactions.
func (a *Applier) handleTwoPhase(ctx context.Context, ev Event, msg protocol.Message) error {
	return fmt.Errorf("%w: %s messages (two-phase transactions) are not applied by this version", ErrNotSupported, msg.Type())
}
