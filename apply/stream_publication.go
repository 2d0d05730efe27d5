package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/protocol"
)

// sqlstateUndefinedObject is what PostgreSQL 15 to 17 end the stream with
// for a missing publication.
const sqlstateUndefinedObject = "42704"

// publicationLost returns err, the error that ended the stream, as a
// permanent error naming the publications when the stream ended because
// of a missing publication; any other error is returned unchanged.
//
// A publication can go missing while the applier streams: dropped on the
// source, or, for a slot whose position is older than the publication,
// not yet created at the point of the WAL being decoded (the walsender
// looks publications up as of that point). PostgreSQL 15 to 17 end the
// stream with `publication "x" does not exist` (42704); PostgreSQL 18 only
// warns and sends nothing for the publication, which the stream turns into
// a *protocol.PublicationSkippedError before anything after the warning is
// received (replconn_notice.go). Either way nothing past that point has
// been confirmed, and the session ends with a permanent error that names
// the publications: retrying cannot bring back what the source does not
// send. A publication that is missing from the catalog is also what the
// preflight of the next start reports.
func (s *session) publicationLost(ctx context.Context, err error) error {
	cfg := s.cfg
	var skipped *protocol.PublicationSkippedError
	var pgErr *pgconn.PgError
	var named []string
	switch {
	case errors.As(err, &skipped):
		named = skipped.Publications
	case errors.As(err, &pgErr) && pgErr.Code == sqlstateUndefinedObject:
		named = protocol.PublicationsNamed(pgErr.Message, cfg.Publications)
	default:
		return err
	}
	if len(named) == 0 {
		named = cfg.Publications
	}
	lookCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	have, db, lookErr := sourcePublications(lookCtx, cfg)
	if lookErr != nil {
		return &PermanentError{Err: fmt.Errorf("the source stopped sending for publication %s after source LSN %s, and nothing past it was confirmed; check that it exists on the source (looking it up failed: %v): %w",
			sqlgen.QuoteList(named), s.serverWALEnd, lookErr, err)}
	}
	var missing []string
	for _, p := range cfg.Publications {
		if !slices.Contains(have, p) {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return &PermanentError{Err: fmt.Errorf("%w; the source stopped sending for it after source LSN %s, and nothing past that was confirmed: %w",
			missingPublications(missing, have, db), s.serverWALEnd, err)}
	}
	return &PermanentError{Err: fmt.Errorf("publication %s did not exist in source database %q at source LSN %s (it was dropped, or created later in the WAL than the slot's position), so the source sends nothing for it there; "+
		"walapply stopped rather than confirm past changes it never received. If the changes of that stretch of WAL are not needed, "+
		"advance the slot past it on the source (SELECT pg_replication_slot_advance('%s', pg_current_wal_lsn()) skips everything up to now), "+
		"or start a new applier with --copy: %w", sqlgen.QuoteList(named), db, s.serverWALEnd, cfg.Slot, err)}
}

// sourcePublications lists the publications of the source database, on a
// connection of its own (the replication connection is spent).
func sourcePublications(ctx context.Context, cfg *Config) (pubs []string, db string, err error) {
	conn, err := connectSource(ctx, cfg, "check")
	if err != nil {
		return nil, "", err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := conn.QueryRow(ctx, "SELECT pg_catalog.current_database()::text").Scan(&db); err != nil {
		return nil, "", err
	}
	rows, err := conn.Query(ctx, "SELECT pubname::text FROM pg_catalog.pg_publication ORDER BY 1")
	if err != nil {
		return nil, "", err
	}
	pubs, err = pgx.CollectRows(rows, pgx.RowTo[string])
	return pubs, db, err
}
