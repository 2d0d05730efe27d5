package parallel

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/state"
)

// OriginPrefix starts every worker's origin name; apply names a worker's
// origin "walapply_par<id>_<applier>" as it names its copy workers'
// (initcopy.WorkerOriginName).
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

// OriginConn is the connection the origins are read and repaired on (the
// applier's control connection, a *pgx.Conn).
type OriginConn interface {
	Querier
	state.Querier
}

// Repair moves the applier's origin up to the furthest of its workers'
// origins (those mine says are its own; Furthest), after a crash between
// a worker's commit and the applier's origin following it. apply runs it
// at every connect, before anything sets the origin up.
func Repair(ctx context.Context, q OriginConn, origin string, mine func(origin string) bool, log zerolog.Logger) error {
	origins, err := OriginsOf(ctx, q, mine)
	if err != nil || len(origins) == 0 {
		return err
	}
	main, _, err := state.OriginProgress(ctx, q, origin, false)
	if err != nil {
		return err
	}
	best, from := Furthest(main, origins)
	if from == "" {
		return nil
	}
	if err := state.AdvanceOrigin(ctx, q, origin, best); err != nil {
		return err
	}
	log.Info().Str("origin", origin).Stringer("from", main).Stringer("to", best).Str("parallel_origin", from).
		Msg("the applier's origin follows a streamed transaction committed on a parallel connection just before the last stop")
	return nil
}
