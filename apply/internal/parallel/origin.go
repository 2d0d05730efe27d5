package parallel

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/protocol"
)

// OriginPrefix starts every worker's origin name; apply names a worker's
// origin "walapply_par<id>_<applier>" as it names its copy workers'
// (workerOriginName).
const OriginPrefix = "walapply_par"

// Querier runs a query (a *pgx.Conn).
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// OriginsOf lists the worker origins on the target that mine says are the
// applier's, and their progress.
func OriginsOf(ctx context.Context, q Querier, mine func(origin string) bool) (map[string]protocol.LSN, error) {
	rows, err := q.Query(ctx, `SELECT roname::text, coalesce(pg_catalog.pg_replication_origin_progress(roname, false)::text, '0/0')
		FROM pg_catalog.pg_replication_origin WHERE pg_catalog.starts_with(roname, $1)`, OriginPrefix)
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
		if !mine(name) {
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

// Furthest returns the worker origin of origins furthest past main, the
// applier's origin's progress, and its progress; from is "" when none is
// past main (see the package doc, Progress: after a crash between a
// worker's commit and the applier's origin following it, the applier's
// origin moves up to best).
func Furthest(main protocol.LSN, origins map[string]protocol.LSN) (best protocol.LSN, from string) {
	best = main
	for name, lsn := range origins {
		if lsn > best || (lsn == best && from != "" && name < from) {
			best, from = lsn, name
		}
	}
	return best, from
}
