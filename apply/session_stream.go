package apply

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/apply/internal/engine"
	"github.com/walapply/walapply/apply/internal/parallel"
	"github.com/walapply/walapply/apply/internal/pipeline"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/state"
)

// checkStreamingConfig validates Config.Streaming. "" stays "" until the
// source's version is known (prepareStreaming).
func checkStreamingConfig(cfg *Config) error {
	switch cfg.Streaming {
	case "", "off", "on", "parallel":
		return nil
	}
	return fmt.Errorf("%w: --streaming %q: want off, on or parallel", ErrConfig, cfg.Streaming)
}

// resolveStreaming turns the configured streaming mode into the one to ask
// the source for: "" means on where the source can stream (PostgreSQL 14+).
func resolveStreaming(mode string, serverVersion int) (string, error) {
	major := fmt.Sprintf("%d.%d", serverVersion/10000, serverVersion%10000)
	switch {
	case mode == "" && serverVersion >= 140000:
		return "on", nil
	case mode == "":
		return "off", nil
	case mode == "on" && serverVersion < 140000:
		return "", fmt.Errorf("%w: --streaming on needs a PostgreSQL 14 or later source (the source is %s); use --streaming off", ErrConfig, major)
	case mode == "parallel" && serverVersion < 160000:
		hint := "use --streaming on"
		if serverVersion < 140000 {
			hint = "use --streaming off"
		}
		return "", fmt.Errorf("%w: --streaming parallel needs a PostgreSQL 16 or later source (the source is %s); %s", ErrConfig, major, hint)
	}
	return mode, nil
}

// prepareStreaming settles the streaming mode for this connection and, when
// streaming, opens the spill directory, removing the spill files an earlier
// run left behind: their transactions are sent again from the start.
func (s *session) prepareStreaming(ctx context.Context) error {
	cfg := s.cfg
	mode, err := resolveStreaming(cfg.Streaming, s.source.ServerVersion())
	if err != nil {
		return err
	}
	cfg.Streaming = mode
	if mode == "off" {
		return nil
	}
	target, err := targetIdentity(ctx, s.control) // identity.go
	if err != nil {
		return err
	}
	dir := cfg.SpillDir
	if dir == "" {
		if dir, err = defaultSpillDir(cfg.Name, target); err != nil {
			return err
		}
	}
	fsys := cfg.spillFS
	if fsys == nil {
		fsys = state.OSFS
	}
	st, removed, err := engine.OpenStreamState(fsys, dir, cfg.Name, target)
	if len(removed) > 0 {
		cfg.Logger.Info().Str("spill_dir", dir).Strs("removed", removed).
			Msg("removed spill files of streamed transactions from an earlier run; the source sends those transactions again")
	}
	if err != nil {
		return err
	}
	// A replay can take longer than the source's wal_sender_timeout, and
	// the run loop sends no feedback meanwhile: the replay sends the
	// positions the loop last confirmed (safe: nothing of the transaction
	// is in them, and they are recorded, identity.go).
	st.SetKeepalive(func(ctx context.Context) error { return s.keeper.resendStatus(ctx) }, cfg.FeedbackInterval) // s.keeper is set later
	s.applier.SetStream(st)
	cfg.Logger.Debug().Str("spill_dir", dir).Str("streaming", mode).Msg("streamed transactions are spilled")
	return s.startParallel(ctx)
}

// closeStreaming removes this session's spill files when it ends: the
// source sends their transactions again on the next connection.
func (s *session) closeStreaming() {
	s.closeParallel()
	if s.applier == nil {
		return
	}
	removed, on, err := s.applier.RemoveSpill()
	if !on {
		return
	}
	if err != nil {
		s.cfg.Logger.Warn().Err(err).Msg("removing the spill files of this session; the next start removes what is left")
	}
	if len(removed) > 0 {
		s.cfg.Logger.Debug().Strs("removed", removed).Msg("removed spill files of unfinished streamed transactions")
	}
}

// defaultSpillDir is $XDG_STATE_HOME/walapply/<name>/<target>/spill, or
// ~/.local/state/walapply/<name>/<target>/spill: keyed by the target too, so
// that appliers of one name feeding different targets from one host keep
// their spill files apart (state.OpenSpillDir refuses a directory of
// another target in any case).
func defaultSpillDir(name, target string) (string, error) {
	base := os.Getenv("XDG_STATE_HOME")
	if !filepath.IsAbs(base) { // the XDG spec says to ignore relative paths
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("%w: no --spill-dir given and no home directory for the default (%v); set --spill-dir", ErrConfig, err)
		}
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "walapply", pathComponent(name), pathComponent(target), "spill"), nil
}

// pathComponent turns an applier name (any UTF-8 without control
// characters) into one safe path component: bytes other than letters,
// digits, '_', '-' and '.' are %-escaped, and so are the dots of "." and
// "..".
func pathComponent(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-', c == '.':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	if out := b.String(); out != "." && out != ".." {
		return out
	}
	return strings.ReplaceAll(name, ".", "%2E")
}

// defaultParallelWorkers is Config.ParallelWorkers' default, as
// max_parallel_apply_workers_per_subscription's.
const defaultParallelWorkers = 2

// checkParallelConfig validates Config.ParallelWorkers.
func checkParallelConfig(cfg *Config) error {
	switch {
	case cfg.ParallelWorkers < 0:
		return fmt.Errorf("%w: --parallel-workers %d: want 0 or more", ErrConfig, cfg.ParallelWorkers)
	case cfg.ParallelWorkers == 0:
		cfg.ParallelWorkers = defaultParallelWorkers
	}
	return nil
}

// parallelFallback is the hook in Run's retry loop: it reports whether err
// is a fallback (parallel.FallbackError), and marks the transaction for
// the spill path.
//
// A deadlock or lock timeout on the main connection while transactions
// were applied as they streamed (PostgreSQL's deadlock detector chose the
// main connection's side of a cycle with a worker) is not a fallback: Run
// retries it as any transient error, but those transactions are spilled in
// the next session, so that the cycle cannot come back.
func (c *Config) parallelFallback(err error) bool {
	if c.spillXids == nil {
		c.spillXids = map[uint32]bool{}
	}
	var pf *parallel.FallbackError
	if !errors.As(err, &pf) {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "55P03") && len(c.openParallel) > 0 {
			for _, xid := range c.openParallel {
				c.spillXids[xid] = true
			}
			c.Logger.Warn().Uints32("xids", c.openParallel).Err(err).
				Msg("a lock conflict ended the session while streamed transactions were applied as they streamed; the source sends them again and they are spilled")
		}
		return false
	}
	c.spillXids[pf.Xid] = true
	c.Logger.Warn().Uint32("xid", pf.Xid).AnErr("reason", pf.Reason).
		Msg("a streamed transaction cannot be applied as it streams; reconnecting at once, the source sends it again and it is spilled and applied at its commit")
	return true
}

// startParallel sets up the pool for a session with --streaming parallel.
//
// The run loop's side of it is here: package parallel (internal/parallel,
// whose package doc is the design) holds the workers, each applying a
// streamed transaction as it streams on a target connection of its own;
// the run loop decides which transactions go there (parallelUsable), hands
// it the stream events (parallelStream, parallelPrepare) and follows a
// worker's commit with the applier's origin (advanceAfterParallel).
// internal/engine/stream_parallel_worker.go gives each worker its applier,
// stream_parallel_origin.go names and repairs the workers' origins.
func (s *session) startParallel(ctx context.Context) error {
	if s.cfg.Streaming != "parallel" || s.cfg.ParallelWorkers <= 0 {
		return nil
	}
	conn, err := connectTarget(ctx, s.cfg, "parallel watch")
	if err != nil {
		return err
	}
	watch := parallel.StartWatch(ctx, conn, s.target.PgConn().PID(), s.cfg.Logger)
	s.applier.SetParallel(parallel.New(parallel.Options{Size: s.cfg.ParallelWorkers, MinRun: engine.CopyMinRun,
		Dial: &parallelDialer{cfg: s.cfg, main: s.applier}}, watch),
		func(xid uint32) bool { return s.cfg.spillXids[xid] }, s.cfg.parallelCommitted)
	return nil
}

// closeParallel ends the pool's workers: their open transactions roll back
// (the source sends them again).
func (s *session) closeParallel() {
	if s.applier == nil {
		return
	}
	if open, ok := s.applier.CloseParallel(); ok {
		s.cfg.openParallel = open
	}
}

// parallelDialer opens the connections of a session's parallel workers
// (parallel.Dialer), each with an applier of its own.
type parallelDialer struct {
	cfg  *Config
	main *engine.Applier // the run loop's
}

// Worker connects worker id and sets its session up like the main one's,
// with its own origin.
func (d *parallelDialer) Worker(ctx context.Context, id int) (parallel.Applier, error) {
	cfg, main := d.cfg, d.main
	origin := parallelOriginName(cfg.Name, id)
	conn, err := connectTarget(ctx, cfg, "parallel "+strconv.Itoa(id))
	if err != nil {
		return nil, err
	}
	if err := state.EnsureOrigin(ctx, conn, origin); err != nil {
		conn.Close(ctx)
		return nil, err
	}
	sess := pipeline.New(conn)
	if err := sess.Setup(ctx, origin); err != nil {
		conn.Close(ctx)
		return nil, err
	}
	wa, err := engine.NewWorkerApplier(main, id, sess, engine.NewWorkerConn(conn, sess))
	if err != nil {
		conn.Close(ctx)
		return nil, err
	}
	return wa, nil
}

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

// sqlstateUndefinedObject is what PostgreSQL 15 to 17 end the stream with
// for a missing publication.
const sqlstateUndefinedObject = "42704"
