package apply

import (
	"context"

	"github.com/walapply/walapply/apply/internal/parallel"
	"github.com/walapply/walapply/protocol"
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
// its workers' origins, after a crash between a worker's commit and the
// applier's origin following it (parallel.Repair). It runs at every
// connect, before anything sets the origin up.
func (s *session) repairParallelOrigins(ctx context.Context) error {
	mine := func(origin string) bool { return isParallelOriginOf(s.cfg.Name, origin) }
	return parallel.Repair(ctx, s.control, s.origin, mine, s.cfg.Logger)
}
