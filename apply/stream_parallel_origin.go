package apply

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/state"
)

// parallelOriginPrefix starts every worker's origin name.
const parallelOriginPrefix = "walapply_par"

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
func parallelOriginsOf(ctx context.Context, q *pgx.Conn, applier string) (map[string]protocol.LSN, error) {
	rows, err := q.Query(ctx, `SELECT roname::text, coalesce(pg_catalog.pg_replication_origin_progress(roname, false)::text, '0/0')
		FROM pg_catalog.pg_replication_origin WHERE pg_catalog.starts_with(roname, $1)`, parallelOriginPrefix)
	if err != nil {
		return nil, fmt.Errorf("listing the replication origins of the parallel connections: %w", err)
	}
	defer rows.Close()
	out := map[string]protocol.LSN{}
	for rows.Next() {
		var name, lsn string
		if err := rows.Scan(&name, &lsn); err != nil {
			return nil, err
		}
		if !isParallelOriginOf(applier, name) {
			continue
		}
		l, err := protocol.ParseLSN(lsn)
		if err != nil {
			return nil, err
		}
		out[name] = l
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing the replication origins of the parallel connections: %w", err)
	}
	return out, nil
}

// repairParallelOrigins moves the applier's origin up to the furthest of
// its workers' origins (see parallelPool: after a crash between a worker's
// commit and the applier's origin following it). It runs at every connect,
// before anything sets the origin up.
func (s *session) repairParallelOrigins(ctx context.Context) error {
	origins, err := parallelOriginsOf(ctx, s.control, s.cfg.Name)
	if err != nil || len(origins) == 0 {
		return err
	}
	main, _, err := state.OriginProgress(ctx, s.control, s.origin, false)
	if err != nil {
		return err
	}
	best, from := main, ""
	for name, lsn := range origins {
		if lsn > best {
			best, from = lsn, name
		}
	}
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
