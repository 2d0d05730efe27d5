package apply

import (
	"context"
	"fmt"
	"strconv"

	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/twophase"
)

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
