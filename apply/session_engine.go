package apply

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/apply/internal/engine"
)

// engineConfigOf is cfg's engine.Options; cfg has its defaults
// (Config.withDefaults fills the conflict policies in).
func engineConfigOf(cfg *Config) engine.Options {
	return engine.Options{
		Binary:         cfg.Binary,
		Grouping:       !cfg.NoGroupCommit,
		NoGroupThrough: cfg.noGroupThrough,
		GroupMaxWait:   cfg.GroupMaxWait,
		Compaction:     !cfg.NoCompaction,
		Name:           cfg.Name,
		Policies:       cfg.Conflicts,
		SkipLSN:        cfg.SkipLSN,
	}
}

// configDialer is the applier's dialer: connections made as cfg says.
type configDialer struct{ cfg *Config }

func (d configDialer) Target(ctx context.Context, role string) (*pgx.Conn, error) {
	return connectTarget(ctx, d.cfg, role)
}

func (d configDialer) Source(ctx context.Context, role string) (*pgx.Conn, error) {
	return connectSource(ctx, d.cfg, role)
}
