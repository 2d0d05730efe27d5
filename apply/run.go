package apply

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/apply/internal/engine"
	"github.com/walapply/walapply/apply/internal/pipeline"
	"github.com/walapply/walapply/apply/internal/registry"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/internal/secret"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/state"
)

// Run replicates until ctx ends (then it stops at a clean point and returns
// nil) or a permanent error occurs. Transient errors are retried with
// exponential backoff from the target's durable progress.
func Run(ctx context.Context, c Config) error {
	cfg, err := c.withDefaults()
	if err != nil {
		return asPermanent(err)
	}
	log := cfg.Logger
	defer dropCreatedSlot(&cfg)
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = 200 * time.Millisecond
	bo.MaxInterval = 30 * time.Second
	bo.MaxElapsedTime = 0          // retry transient errors for as long as it takes
	first := newFirstConnect(&cfg) // connect_retry.go: --connect-timeout
	for {
		sctx, release := first.sessionContext(ctx)
		progressed, err := runSession(sctx, &cfg)
		release()
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			return nil
		}
		var nt *engine.NewTablesError
		if errors.As(err, &nt) {
			// Not a failure: the next session copies them (refresh.go).
			log.Info().Str("relations", sqlgen.LogRelations(nt.Tables)).Msg("newly published table(s) in the stream; starting a new session to copy them")
			cfg.newTables = append(cfg.newTables, nt.Tables...)
			continue
		}
		if cfg.parallelFallback(err) { // session_stream.go
			cfg.observeSessionEnded(err)
			continue
		}
		if perr := first.failed(sctx, err); perr != nil {
			cfg.observeSessionEnded(perr)
			return perr
		}
		cfg.observeSessionEnded(err)
		var te *TxnError
		if cfg.retryUngrouped(err, &te) {
			// Apply what came before the failed transaction one by one,
			// so that the error stops exactly at it (see internal/engine/applier_group.go).
			log.Info().Stringer("commit_lsn", te.CommitLSN).Msg("a transaction failed inside a group or on a value; retrying without grouping up to it")
			cfg.noGroupThrough = te.CommitLSN
			continue
		}
		if !IsTransient(err) {
			return asPermanent(err) // errors.go: every permanent error carries PermanentError
		}
		if progressed {
			bo.Reset()
		}
		wait, logged := first.retrying(err, bo.NextBackOff())
		if !logged {
			log.Warn().Err(err).Float64("retry_in_seconds", seconds(wait)).Msg("transient error; reconnecting")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// retryUngrouped reports whether Run retries after err with grouping and
// compaction off up to the failed transaction (te, set from err's chain):
// once, for a failure inside a group (which rolled back the transactions
// before it too) or a vague one, so that the error stops exactly at that
// transaction and names what it can. A vague failure at a transaction
// before the one the last retry stopped at (a group's multi-row
// statements name its last transaction; applied one by one, an earlier
// one failed) is retried once more, to check that transaction's values
// (internal/engine/valuecheck.go).
func (c *Config) retryUngrouped(err error, te **TxnError) bool {
	if !errors.As(err, te) || (*te).CommitLSN == c.noGroupThrough {
		return false
	}
	vague := engine.Vague(*te)
	return ((*te).Grouped || vague) && c.noGroupThrough < (*te).CommitLSN || vague
}

// session is one connected run: the connections and the loop state.
type session struct {
	cfg     *Config
	target  *pgx.Conn // applies changes
	control *pgx.Conn // reads the origin's durable progress
	source  *protocol.ReplConn
	plain   *dial[*pgx.Conn] // the start's plain source connection (connect_plain.go)
	stream  *protocol.ReplStream
	keeper  *streamKeeper // serialises the stream's use with its keepalive goroutine
	origin  string
	facts   *preflightFacts // what the preflight learned (preflight.go)
	applier *engine.Applier
	tracker *state.FlushTracker
	heard   receipts // when the walsender was last heard from (observe.go)
	decoder *protocol.Decoder
	origins engine.OriginTracker // where the last transaction came from

	serverWALEnd protocol.LSN
	progressed   bool
	// confirmed is the furthest position the source may have been told
	// is flushed, as recorded on the target (identity.go).
	confirmed protocol.LSN
	// untilPassed: a transaction committing after Config.Until arrived
	// (until.go).
	untilPassed bool
}

// runSession connects, replicates until an error or the end of ctx, and
// cleans up. progressed reports whether any transaction was applied.
func runSession(ctx context.Context, cfg *Config) (progressed bool, err error) {
	s := &session{cfg: cfg}
	defer s.close()
	if err := s.connect(ctx); err != nil {
		return false, err
	}
	err = s.loop(ctx)
	return s.progressed, err
}

func (s *session) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if s.applier != nil {
		s.applier.StopBackground(ctx)
		if err := s.applier.Abandon(ctx); err != nil {
			s.cfg.Logger.Debug().Err(err).Msg("abandoning the open transaction")
		}
	}
	s.closeStreaming()
	if s.stream != nil && s.tracker != nil && s.control != nil {
		// A last confirmation of what is durable, so the source can recycle WAL.
		if err := s.feedback(ctx); err != nil {
			s.cfg.Logger.Debug().Err(err).Msg("final feedback")
		}
	}
	if s.source != nil {
		_ = s.source.Close(ctx)
	}
	if s.target != nil {
		_ = s.target.Close(ctx)
	}
	if s.control != nil {
		dropLease(ctx, s.control, s.cfg.Name, s.cfg.leaseBackend, s.cfg.Logger)
		_ = s.control.Close(ctx)
	}
}

// replicationName names a replication connection after the applier, as
// connectTarget names the target's: "walapply <name> <role>".
func (c *Config) replicationName(role string) protocol.ConnectOption {
	return protocol.ApplicationName("walapply " + c.Name + " " + role)
}

// connectTarget opens a target connection named after the applier.
func connectTarget(ctx context.Context, cfg *Config, role string) (*pgx.Conn, error) {
	pc, err := pgx.ParseConfig(cfg.Target)
	if err != nil {
		return nil, fmt.Errorf("%w: target connection string: %v", ErrConfig, secret.Error(err, cfg.Target))
	}
	pc.RuntimeParams["application_name"] = "walapply " + cfg.Name + " " + role
	if _, set := pc.RuntimeParams["jit"]; !set {
		// Every statement walapply runs is short, but the planner's
		// estimates for some are not (the recursive catalog query that
		// finds equality operators is costed above jit_above_cost):
		// compiling it took half a second per table, for nothing.
		pc.RuntimeParams["jit"] = "off"
	}
	if _, set := pc.RuntimeParams["plan_cache_mode"]; !set {
		// The statements are prepared once and run thousands of times,
		// the multi-row ones with arrays whose size a custom plan would
		// re-plan for at every execution: a 50-table backlog spent a
		// quarter of the target's CPU planning (2.78 s against 2.10 s
		// with generic plans). Rows are found by key, so the generic plan
		// is an index lookup per row, whatever the number of rows.
		pc.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	}
	conn, err := pgx.ConnectConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("connecting to the target (%s): %w", role, secret.Error(explainConnect(err), cfg.Target)) // connect_errors.go
	}
	return conn, nil
}

// connect starts a session in two phases (DESIGN.md invariant 10): it
// reaches both sides and runs the preflight (preflight.go), which creates
// nothing; only then does it create what the applier needs: the origin, the
// applier's row in walapply.appliers, the initial copy and the slot. The
// walapply schema's migration (prepareTarget) comes before the preflight:
// it is shared by every applier of the target and is no applier's.
func (s *session) connect(ctx context.Context) error {
	cfg := s.cfg
	log := cfg.Logger
	var err error
	if s.origin, err = state.OriginName(cfg.Name); err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	src := s.dialSource(ctx) // connect_target.go: the source's connection opens meanwhile
	defer src.abandon()
	s.plain = s.dialPlain(ctx) // connect_plain.go: and the plain one the start's checks share
	defer s.closePlain()
	if err := s.connectTargets(ctx); err != nil { // connect_target.go: apply and control at once
		return err
	}
	// The privilege check (privileges.go) is the preflight's first part:
	// it runs before the migration, which already needs CREATE on the
	// target database, and lists every missing grant at once.
	plain, release, err := s.sourceSQL(ctx, "check")
	if err != nil {
		return err
	}
	err = checkPrivileges(ctx, plain, s.control, cfg)
	release()
	if err != nil {
		return err
	}
	if err := prepareTarget(ctx, s.control, cfg.Target); err != nil {
		return err
	}
	if err := takeLease(ctx, s.control, cfg.Name, &cfg.leaseBackend); err != nil { // lease.go: one process per applier name and target
		return err
	}
	if s.source, err = src.take(); err != nil {
		return fmt.Errorf("connecting to the source: %w", secret.Error(explainConnect(err), cfg.Source)) // connect_errors.go
	}
	cfg.markReached() // connect_retry.go: from here on, retried for ever
	if s.facts, err = s.preflight(ctx); err != nil {
		return err
	}
	sys := s.facts.sys

	// Validated: from here on, things are created.
	if err := state.EnsureOrigin(ctx, s.control, s.origin); err != nil {
		return err
	}
	if err := repairParallelOrigins(ctx, s.control, cfg.Name, s.origin, cfg.Logger); err != nil { // stream_parallel_origin.go
		return err
	}
	if err := recordTimeline(ctx, s.control, cfg.Name, s.facts.timeline); err != nil { // timeline.go
		return err
	}
	applier := registry.Applier{Name: cfg.Name, Slot: cfg.Slot, Publications: cfg.Publications, Origin: s.origin}
	if err := registerApplier(ctx, s.control, applier, sys, cfg.Logger); err != nil {
		return err
	}
	if err := s.resolveUntil(ctx); err != nil { // until.go
		return err
	}
	if s.facts.copyTodo {
		// A copy may take hours: the shared connection would sit idle
		// through it (and meet the source's idle_session_timeout).
		s.closePlain()
	}
	if err := s.initialCopy(ctx); err != nil { // copy.go: --copy creates the slot
		return err
	}
	if err := s.ensureSlot(ctx); err != nil {
		return err
	}
	watch, err := s.refreshTables(ctx, cfg.newTables) // refresh.go: tables published later
	if err != nil {
		return err
	}

	sess := pipeline.New(s.target)
	if err := sess.Setup(ctx, s.origin); err != nil {
		return err
	}
	start, _, err := state.OriginProgress(ctx, s.control, s.origin, true)
	if err != nil {
		return fmt.Errorf("reading the progress of replication origin %q on the target: %w", s.origin, err)
	}
	if err := s.checkSlotPosition(ctx, start); err != nil { // identity.go
		return err
	}
	s.applier = engine.New(log, sess, engineConfigOf(cfg), start)
	copied, err := loadCopyFilter(ctx, s.control, cfg.Name, start) // copy_filter.go
	if err != nil {
		return err
	}
	var ddl *engine.DDLState
	if cfg.DDL {
		if ddl, err = s.ddlPublications(ctx); err != nil { // session_ddl.go
			return err
		}
	}
	watch.SetStart(s.startSync) // refresh_sync.go
	s.applier.Attach(s.control, copied, watch, ddl)
	if err := s.checkSkip(ctx, start); err != nil { // session_skip.go
		return err
	}
	s.tracker = state.NewFlushTracker(start)
	if err := s.prepareStreaming(ctx); err != nil {
		return err
	}
	if err := s.prepareTwoPhase(ctx); err != nil {
		return err
	}

	s.stream, err = s.source.StartReplication(ctx, cfg.Slot, start, protocol.StreamOptions{
		Publications: cfg.Publications,
		Binary:       cfg.Binary,
		Streaming:    cfg.Streaming,
		TwoPhase:     cfg.TwoPhase,
		Origin:       cfg.Origin,
		Messages:     cfg.DDL,
	})
	if err != nil {
		return fmt.Errorf("starting replication from slot %q at %s: %w", cfg.Slot, start, err)
	}
	s.keeper = &streamKeeper{stream: s.stream}
	if s.decoder, err = protocol.NewDecoder(s.stream.DecoderOptions()); err != nil {
		return err
	}
	cfg.createdSlot = false // replicating: the slot is in use, no longer this start's to drop
	cfg.observeConnected(start)
	log.Info().Str("slot", cfg.Slot).Strs("publications", cfg.Publications).Str("origin", s.origin).
		Stringer("start_lsn", start).Str("source_system_id", sys.SystemID).Int32("timeline", sys.Timeline).
		Int("source_version", s.source.ServerVersion()).Msg("replicating")
	return nil
}

// ensureSlot creates the slot when it is missing and --create-slot asks
// for it. The preflight checked an existing slot; this runs after the
// initial copy, which may have created the slot itself.
func (s *session) ensureSlot(ctx context.Context) error {
	cfg := s.cfg
	st, found, err := s.source.Slot(ctx, cfg.Slot)
	if err != nil {
		return fmt.Errorf("looking up replication slot %q on the source: %w", cfg.Slot, err)
	}
	if found {
		return s.ensureFailover(ctx, st) // failover.go
	}
	if !cfg.CreateSlot {
		return &PermanentError{Err: fmt.Errorf("replication slot %q does not exist on the source; create it with --create-slot (or SELECT pg_create_logical_replication_slot('%s', 'pgoutput') on the source)", cfg.Slot, cfg.Slot)}
	}
	if err := s.refuseNewSlot(ctx); err != nil { // identity.go
		return err
	}
	info, err := s.source.CreateSlot(ctx, cfg.Slot, slotOptions(cfg, "nothing"))
	if err != nil {
		return fmt.Errorf("creating replication slot %q on the source: %w", cfg.Slot, err)
	}
	cfg.Logger.Info().Str("slot", info.Name).Stringer("consistent_point", info.ConsistentPoint).Msg("created replication slot")
	cfg.createdSlot = true
	return nil
}

// dropCreatedSlot drops the slot this run created if the run ends (a
// permanent error, or stopped while retrying) before it replicated from it:
// a start that fails leaves the source as it was (DESIGN.md invariant 10),
// and a slot nobody reads would hold the source's WAL forever.
func dropCreatedSlot(cfg *Config) {
	if !cfg.createdSlot {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	log := cfg.Logger
	err := func() error {
		rc, err := protocol.ConnectReplication(ctx, cfg.Source)
		if err != nil {
			return err
		}
		defer rc.Close(ctx)
		// WAIT: the walsender of the session that just ended may not
		// have released the slot yet.
		return rc.DropSlot(ctx, cfg.Slot, true)
	}()
	if err != nil && !isUndefinedObject(err) {
		log.Warn().Err(err).Str("slot", cfg.Slot).Msg(fmt.Sprintf("the start failed, and the replication slot it created could not be dropped: "+
			"drop it on the source (SELECT pg_drop_replication_slot('%s')) unless you run walapply again with it", cfg.Slot))
		return
	}
	cfg.createdSlot = false
	log.Info().Str("slot", cfg.Slot).Msg("dropped the replication slot this start created, since the start failed")
}
