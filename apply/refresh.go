package apply

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/apply/internal/engine"
	"github.com/walapply/walapply/apply/internal/initcopy"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/protocol"
)

// refreshTables brings walapply.copy_state up to date with the tables the
// publications publish now, copies the new ones when the applier copies,
// and returns the watch for the stream's Relation messages. It runs at
// every session start, after the initial copy and before streaming.
// seen are the tables the previous session stopped for (engine.NewTablesError).
//
// Tables published after an applier started: what PostgreSQL's
// ALTER SUBSCRIPTION ... REFRESH PUBLICATION (copy_data = true) does.
//
// walapply.copy_state is the applier's list of the tables it knows, like
// pg_subscription_rel. Every session start compares it with the tables the
// publications publish now (refreshTables), and the applier checks every
// Relation message of the stream against it (engine.TableWatch.check), since the
// stream names a newly published table in a Relation message before the
// first change to it.
//
// An applier whose initial copy finished (--copy) copies a table found at
// a session start before it streams, in a snapshot of its own: a
// temporary slot exports a snapshot S at its consistent point L, the
// table is copied in S, and its row turns 'done' with L and S in the same
// target transaction as its rows, exactly as a resumed initial copy does
// (copy.go). Streaming then starts at the origin's progress O, which is
// below L, and the rule of engine.CopyFilter skips the table's changes that
// the copy holds: those of a transaction that committed before L and is
// visible in S. That rule is exact whatever the table saw before: a
// transaction that changed it before it was published committed before L
// (the publication change is older than the slot) and so is in S; one in
// the stream after O is in S exactly when the rule says so; and none of
// its changes was applied before its copy, because nothing of the table
// is applied before it is known. A kill -9 during the copy leaves the
// table 'pending' and empty (its copy rolls back), and the next start
// copies it again in a newer snapshot.
//
// A table found in the stream (its first Relation message) is copied in
// the background while the session applies the other tables
// (refresh_sync.go). Where that cannot be done, the session ends instead
// (engine.NewTablesError) before anything of the table is applied: what is
// uncommitted is rolled back, as after any transient error, and Run
// starts the next session at once, which copies the table as above.
func (s *session) refreshTables(ctx context.Context, seen []sqlgen.Rel) (*engine.TableWatch, error) {
	cfg, log := s.cfg, s.cfg.Logger
	rec, err := initcopy.ReadRecord(ctx, s.control, cfg.Name)
	if err != nil {
		return nil, err
	}
	src, release, tables, err := s.publishedNow(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	known, err := readKnownTables(ctx, s.control, cfg.Name)
	if err != nil {
		return nil, err
	}
	copying := rec.Exists
	published := map[sqlgen.Rel]bool{}
	var todo []*initcopy.Table // to copy, or to record
	for _, t := range tables {
		published[t.Rel] = true
		k, ok := known[t.Rel]
		switch {
		case !ok, !k.published:
			todo = append(todo, t)
		case copying && k.status == initcopy.StatusPending:
			todo = append(todo, t)
		case copying && k.status == initcopy.StatusCopied:
			// Copied while a session streamed, which ended before it
			// caught the table up (refresh_sync.go): copied again.
			if err := emptyTable(ctx, s.control, cfg.Name, t); err != nil {
				return nil, err
			}
			todo = append(todo, t)
		}
	}
	var removed, gone []sqlgen.Rel
	for n, k := range known {
		if !published[n] && k.published {
			removed = append(removed, n)
		}
	}
	for _, n := range seen {
		if _, ok := known[n]; !ok && !published[n] {
			gone = append(gone, n)
		}
	}
	slices.SortFunc(removed, compareRelName)
	for _, n := range removed {
		log.Info().Str("relation", sqlgen.LogRelation(n.Schema, n.Name)).
			Msg("table no longer published: its changes are no longer applied; its rows on the target stay")
	}
	for _, n := range gone {
		log.Warn().Str("relation", sqlgen.LogRelation(n.Schema, n.Name)).
			Msg("table published and removed again before it could be copied: its changes while it was published are applied, its earlier rows are missing on the target")
	}

	first := len(known) == 0 && !copying
	var toCopy []*initcopy.Table
	if copying && len(todo) > 0 {
		// Everything that can be wrong with the target, before anything
		// is recorded or copied.
		if err := initcopy.MarkRanged(ctx, s.control, cfg.Name, todo); err != nil {
			return nil, err
		}
		if err := checkTargetTables(ctx, s.control, todo, todo); err != nil {
			return nil, err
		}
		toCopy = todo
	}
	err = pgx.BeginFunc(ctx, s.control, func(tx pgx.Tx) error {
		if err := setPublished(ctx, tx, cfg.Name, removed, false); err != nil {
			return err
		}
		if err := upsertTables(ctx, tx, cfg.Name, relNamesOf(todo), stateFor(copying, first)); err != nil {
			return err
		}
		return insertTables(ctx, tx, cfg.Name, gone, initcopy.StatusNotCopied, false)
	})
	if err != nil {
		return nil, fmt.Errorf("updating the table list in walapply.copy_state on the target: %w", err)
	}
	if !copying && !first {
		for _, t := range todo {
			log.Warn().Str("relation", sqlgen.LogRelation(t.Schema, t.Name)).
				Msg(engine.NotCopiedWarning)
		}
	}
	if len(toCopy) > 0 {
		if err := s.copyNewTables(ctx, toCopy, s.source.ServerVersion()); err != nil {
			return nil, err
		}
	}
	w := engine.NewTableWatch(cfg.Name, copying, recordNotCopied)
	for n, k := range known {
		// A table that is not published now is known only if the stream
		// may still bring changes it made while it was published: else
		// its Relation message is news.
		if k.published || !copying {
			w.Know(n)
		}
	}
	for _, t := range tables {
		w.Know(t.Rel)
	}
	for _, n := range seen {
		w.Know(n) // stopped for once; not published now, nothing to copy
	}
	for _, n := range removed {
		w.Know(n)
	}
	parts, err := partitionsOf(ctx, src, tables, s.source.ServerVersion())
	if err != nil {
		return nil, err
	}
	for _, n := range parts {
		w.Know(n)
	}
	return w, nil
}

// publishedNow lists the tables the publications hold now, on a plain
// source connection (sourceSQL) that the caller releases.
func (s *session) publishedNow(ctx context.Context) (*pgx.Conn, func(), []*initcopy.Table, error) {
	src, release, err := s.sourceSQL(ctx, "refresh")
	if err != nil {
		return nil, nil, nil, err
	}
	tables, err := listPublishedTables(ctx, src, s.cfg.Publications, s.source.ServerVersion())
	if err != nil {
		release()
		return nil, nil, nil, err
	}
	return src, release, tables, nil
}

// partitionsOf lists the partitions of the published partitioned tables.
// A partitioned table published through its root (publish_via_partition_root)
// has its changes sent as the root's, but pgoutput also sends a Relation
// message for the partition each change was made in: that is no news.
func partitionsOf(ctx context.Context, src *pgx.Conn, tables []*initcopy.Table, version int) ([]sqlgen.Rel, error) {
	var roots []sqlgen.Rel
	for _, t := range tables {
		if t.Partitioned {
			roots = append(roots, t.Rel)
		}
	}
	if len(roots) == 0 || version < 130000 { // publish_via_partition_root is 13+
		return nil, nil
	}
	schemas, names := splitNames(roots)
	rows, err := src.Query(ctx, `SELECT pn.nspname::text, pc.relname::text
		FROM unnest($1::text[], $2::text[]) t(s, n)
		JOIN pg_catalog.pg_namespace rn ON rn.nspname = t.s
		JOIN pg_catalog.pg_class rc ON rc.relnamespace = rn.oid AND rc.relname = t.n
		CROSS JOIN LATERAL pg_catalog.pg_partition_tree(rc.oid) pt
		JOIN pg_catalog.pg_class pc ON pc.oid = pt.relid
		JOIN pg_catalog.pg_namespace pn ON pn.oid = pc.relnamespace
		WHERE pt.relid <> rc.oid`, schemas, names)
	if err != nil {
		return nil, fmt.Errorf("listing the partitions of the published tables on the source: %w", err)
	}
	parts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (sqlgen.Rel, error) {
		var n sqlgen.Rel
		return n, r.Scan(&n.Schema, &n.Name)
	})
	if err != nil {
		return nil, fmt.Errorf("listing the partitions of the published tables on the source: %w", err)
	}
	return parts, nil
}

// stateFor is the state a newly found published table is recorded in.
func stateFor(copying, first bool) string {
	switch {
	case copying:
		return initcopy.StatusPending
	case first:
		return initcopy.StatusExisting
	}
	return initcopy.StatusNotCopied
}

// copyNewTables copies tables published after the applier's initial copy
// in a snapshot exported by a temporary slot, as a resumed copy does; the
// origin stays where it is, and the copy filter skips the changes the
// snapshot holds.
func (s *session) copyNewTables(ctx context.Context, todo []*initcopy.Table, version int) error {
	cfg := s.cfg
	// The exported snapshot stays importable while this connection,
	// which created the temporary slot, is open and idle.
	rc, err := protocol.ConnectReplication(ctx, cfg.Source, cfg.replicationName("copy slot"))
	if err != nil {
		return fmt.Errorf("connecting to the source to copy newly published tables: %w", err)
	}
	defer rc.Close(context.WithoutCancel(ctx))
	c := &copier{cfg: cfg, control: s.control, origin: s.origin, rc: rc, act: initcopy.Resume, version: version}
	point, snapshot, err := c.createTempSlot(ctx)
	if err != nil {
		return err
	}
	cfg.Logger.Info().Str("relations", sqlgen.LogRelations(relNamesOf(todo))).Stringer("snapshot_lsn", point).
		Msg("copying newly published tables; their changes the snapshot holds are skipped from the stream")
	c.prog = newCopyProgress(cfg, len(todo), 0, todo)
	stopReports := c.prog.Report(ctx)
	err = c.copyTables(ctx, todo, point, snapshot)
	stopReports()
	if err != nil {
		return err
	}
	return initcopy.DropOrigins(ctx, s.control, cfg.Name)
}

func compareRelName(a, b sqlgen.Rel) int {
	if c := strings.Compare(a.Schema, b.Schema); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}
