package apply

import (
	"context"

	"github.com/rs/zerolog"
	"github.com/walapply/walapply/apply/internal/initcopy"
	"github.com/walapply/walapply/apply/internal/parallel"
	"github.com/walapply/walapply/protocol"
)

// parallelOriginPrefix starts every worker's origin name.
const parallelOriginPrefix = parallel.OriginPrefix

// parallelOriginName names the replication origin of parallel worker id
// (from 1): "walapply_par<id>_<applier>", by initcopy.WorkerOriginName, the
// one rule naming the origins of an applier's workers (the copy workers'
// are initcopy.OriginName).
func parallelOriginName(applier string, id int) string {
	return initcopy.WorkerOriginName(parallelOriginPrefix, applier, id)
}

// isParallelOriginOf reports whether origin is one of applier's worker
// origins (initcopy.IsWorkerOriginOf).
func isParallelOriginOf(applier, origin string) bool {
	return initcopy.IsWorkerOriginOf(parallelOriginPrefix, applier, origin)
}

// parallelOriginsOf lists applier's worker origins on the target and their
// progress.
func parallelOriginsOf(ctx context.Context, q parallel.Querier, applier string) (map[string]protocol.LSN, error) {
	return parallel.OriginsOf(ctx, q, func(origin string) bool { return isParallelOriginOf(applier, origin) })
}

// repairParallelOrigins moves applier's origin up to the furthest of its
// workers' origins, after a crash between a worker's commit and the
// applier's origin following it (parallel.Repair). The session runs it at
// every connect, on its control connection, before anything sets the
// origin up.
func repairParallelOrigins(ctx context.Context, conn parallel.OriginConn, applier, origin string, log zerolog.Logger) error {
	mine := func(o string) bool { return isParallelOriginOf(applier, o) }
	return parallel.Repair(ctx, conn, origin, mine, log)
}
