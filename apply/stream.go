package apply

import (
	"context"
	"fmt"

	"github.com/walapply/walapply/protocol"
)

// checkStreamingConfig validates and defaults Config.Streaming.
func checkStreamingConfig(cfg *Config) error {
	switch cfg.Streaming {
	case "", "off":
		cfg.Streaming = "off"
		return nil
	case "on", "parallel":
		return fmt.Errorf("%w: --streaming %s: applying streamed transactions is not yet supported by this version; use --streaming off (the source then sends large transactions whole at commit)", ErrNotSupported, cfg.Streaming)
	}
	return fmt.Errorf("%w: --streaming %q: want off, on or parallel", ErrConfig, cfg.Streaming)
}

// prepareStreaming readies the session for streamed transactions.
func (s *session) prepareStreaming(ctx context.Context) error { return nil }

// handleStream acts on the events of streamed transactions.
func (a *Applier) handleStream(ctx context.Context, ev Event, msg protocol.Message) error {
	return fmt.Errorf("%w: %s messages (streamed transactions) are not applied by this version", ErrNotSupported, msg.Type())
}
