package apply

import (
	"context"

	"github.com/walapply/walapply/apply/internal/parallel"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/state"
)

// parallelOriginPrefix starts every worker's origin name.
const parallelOriginPrefix = parallel.OriginPrefix

// parallelOriginName names the replication origin of parallel worker id
// (from 1): "walapply_par<id>_<applier>" (workerOriginName).
func parallelOriginName(applier string, id int) string {
	return workerOriginName(parallelOriginPrefix, applier, id)
}

// isParallelOriginOf reports whether origin is one of applier's worker
// origins.
func isParallelOriginOf(applier, origin string) bool {
	return isWorkerOriginOf(parallelOriginPrefix, applier, origin)
}

// parallelOriginsOf lists applier's worker origins on the target and their
// progress.
func parallelOriginsOf(ctx context.Context, q parallel.Querier, applier string) (map[string]protocol.LSN, error) {
	return parallel.OriginsOf(ctx, q, func(origin string) bool { return isParallelOriginOf(applier, origin) })
}

// repairParallelOrigins moves the applier's origin up to the furthest of
// its workers' origins (parallel.Furthest: after a crash between a
// worker's commit and the applier's origin following it). It runs at
// every connect, before anything sets the origin up.
func (s *session) repairParallelOrigins(ctx context.Context) error {
	origins, err := parallelOriginsOf(ctx, s.control, s.cfg.Name)
	if err != nil || len(origins) == 0 {
		return err
	}
	main, _, err := state.OriginProgress(ctx, s.control, s.origin, false)
	if err != nil {
		return err
	}
	best, from := parallel.Furthest(main, origins)
	if from == "" {
		return nil
	}
	if err := state.AdvanceOrigin(ctx, s.control, s.origin, best); err != nil {
		return err
	}
	s.cfg.Logger.Info().Str("origin", s.origin).Stringer("from", main).Stringer("to", best).Str("parallel_origin", from).
		Msg("the applier's origin follows a streamed transaction committed on a parallel connection just before the last stop")
	return nil
}
