package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/walapply/walapply/apply/internal/initcopy"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/state"
	"github.com/walapply/walapply/twophase"
)

// preflightFacts is what the preflight learned, for the checks and for the
// create phase of connect.
type preflightFacts struct {
	version   int                 // the source's server_version_num
	sys       protocol.SystemInfo // IDENTIFY_SYSTEM
	walLevel  string              // the source's wal_level
	slot      protocol.SlotStatus // Config.Slot on the source, when slotFound
	slotFound bool
	freeSlots int      // replication slots the source can still create
	pubs      []string // every publication of the source database, sorted

	// maxPrepared is the target's max_prepared_transactions, read only
	// with --two-phase.
	maxPrepared int
	// copyTodo: the initial copy is asked for and has tables to copy
	// (checkCopyPlan); copyResume: it resumes an earlier attempt.
	copyTodo, copyResume bool
	// schemaCreates: --schema will create the target tables (checkSchema).
	schemaCreates bool
	// timeline is the source's change of timeline since the applier's
	// last start, nil if none (checkSourceHistory, timeline.go).
	timeline *timelineSwitch
}

// preflightCheck is one check of the preflight: the problems it found
// (each naming the object and saying what to do), or an error if it could
// not look.
type preflightCheck func(ctx context.Context, s *session, f *preflightFacts) (problems []error, err error)

// preflightChecks are run in this order; their problems are reported
// together. A new check is one more entry: it has the session's
// connections (s.control on the target, s.source on the source, whose
// replication connection takes plain SQL too) and s.cfg, and returns its
// problems (the privilege check of privileges.go joins the list so).
var preflightChecks = []preflightCheck{
	checkSourceHistory,
	checkWALLevel,
	checkPublications,
	checkSlot,
	checkSourceOptions,
	checkFailover, // failover.go
	checkTwoPhase,
	checkCopyPlan,
	checkSchema, // schema.go
	checkCopyTargets,
	checkDDL, // session_ddl.go
}

// PreflightError lists every problem the preflight found. Nothing was
// created on either side.
type PreflightError struct {
	Problems []error
}

// Unwrap lets errors.Is and errors.As see each problem.
func (e *PreflightError) Unwrap() []error { return e.Problems }

func (e *PreflightError) Error() string {
	const nothing = "nothing was created on the source or the target"
	if len(e.Problems) == 1 {
		return "cannot start: " + e.Problems[0].Error() + " (" + nothing + ")"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "cannot start, %d problems (%s):", len(e.Problems), nothing)
	for i, p := range e.Problems {
		fmt.Fprintf(&b, " (%d) %s", i+1, p)
		if i < len(e.Problems)-1 {
			b.WriteByte(';')
		}
	}
	return b.String()
}

// preflight reads the facts and runs every check. It creates nothing.
//
// The preflight is DESIGN.md invariant 10, "validate, then create", for a
// session start: before the applier's origin, its walapply.appliers row,
// the slot or anything of the initial copy is created, every session start
// (not only the first: a publication can be dropped between two sessions)
// checks what it can on both sides.
//
// It runs once both sides answered (connect opens the target connections
// and the replication connection first, so an unreachable side, a wrong
// password or a refused port fail before anything is created) and reads the
// facts the checks share once (gatherFacts). Each check then
// returns the problems it found; the preflight reports all of them at once,
// as a permanent *PreflightError, like checkTargetTables does for the copy,
// so that a user fixes everything in one go instead of one failed run per
// problem. A check returns an error only when it could not look (a lost
// connection, which is retried).
func (s *session) preflight(ctx context.Context) (*preflightFacts, error) {
	f, err := s.gatherFacts(ctx)
	if err != nil {
		return nil, err
	}
	var problems []error
	for _, check := range preflightChecks {
		p, err := check(ctx, s, f)
		if err != nil {
			return nil, err
		}
		problems = append(problems, p...)
	}
	if len(problems) > 0 {
		return nil, &PermanentError{Err: &PreflightError{Problems: problems}}
	}
	return f, nil
}

// gatherFacts reads what the checks share from the source's replication
// connection: IDENTIFY_SYSTEM, the slot's row, wal_level, the number of
// free replication slots and the publications.
func (s *session) gatherFacts(ctx context.Context) (*preflightFacts, error) {
	cfg := s.cfg
	f := &preflightFacts{version: s.source.ServerVersion()}
	var err error
	if f.sys, err = s.source.IdentifySystem(ctx); err != nil {
		return nil, fmt.Errorf("identifying the source system: %w", err)
	}
	if f.slot, f.slotFound, err = s.source.Slot(ctx, cfg.Slot); err != nil {
		return nil, fmt.Errorf("looking up replication slot %q on the source: %w", cfg.Slot, err)
	}
	// One result: a tag per row, so that names with any characters come
	// back as they are (no array text to parse).
	res, err := s.source.PgConn().Exec(ctx, `SELECT 'w', pg_catalog.current_setting('wal_level')
		UNION ALL SELECT 's', (pg_catalog.current_setting('max_replication_slots')::int - (SELECT count(*) FROM pg_catalog.pg_replication_slots))::text
		UNION ALL SELECT 'p', pubname::text FROM pg_catalog.pg_publication`).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("reading wal_level and the publications on the source: %w", err)
	}
	for _, r := range res {
		for _, row := range r.Rows {
			if len(row) != 2 {
				return nil, errors.New("reading wal_level and the publications on the source: unexpected result shape")
			}
			switch v := string(row[1]); string(row[0]) {
			case "w":
				f.walLevel = v
			case "s":
				if f.freeSlots, err = strconv.Atoi(v); err != nil {
					return nil, fmt.Errorf("reading the free replication slots on the source: %w", err)
				}
			case "p":
				f.pubs = append(f.pubs, v)
			}
		}
	}
	slices.Sort(f.pubs)
	return f, nil
}

// checkSourceHistory: the source is the applier's cluster, on a timeline
// whose history holds everything the target applied (historyCheck.check,
// timeline.go); the switch to follow, if any, goes into f.timeline.
func checkSourceHistory(ctx context.Context, s *session, f *preflightFacts) ([]error, error) {
	c := historyCheck{control: s.control, source: s.source, applier: s.cfg.Name, origin: s.origin,
		allow: s.cfg.AllowTimelineChange, log: s.cfg.Logger}
	problems, sw, err := c.check(ctx, f.sys)
	f.timeline = sw
	return problems, err
}

// checkWALLevel: logical decoding needs wal_level = logical, which only a
// restart of the source changes.
func checkWALLevel(_ context.Context, _ *session, f *preflightFacts) ([]error, error) {
	if f.walLevel == "logical" {
		return nil, nil
	}
	return []error{fmt.Errorf("the source runs with wal_level = %s, and logical replication needs wal_level = logical: "+
		"set wal_level = logical in the source's postgresql.conf (or ALTER SYSTEM SET wal_level = logical) and restart the source", f.walLevel)}, nil
}

// checkPublications: every --publication exists in the source database.
// The walsender does not check them at START_REPLICATION: PostgreSQL 15 to
// 17 fail at the first change, and 18 only warns and sends nothing for a
// missing one (the stream's side of it is in session_stream.go).
func checkPublications(_ context.Context, s *session, f *preflightFacts) ([]error, error) {
	var missing []string
	for _, p := range s.cfg.Publications {
		if _, found := slices.BinarySearch(f.pubs, p); !found {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return nil, nil
	}
	return []error{missingPublications(missing, f.pubs, f.sys.DBName)}, nil
}

// missingPublications says which publications are missing from the source
// database db and which it has.
func missingPublications(missing, have []string, db string) error {
	what := "publication " + sqlgen.QuoteList(missing) + " does not exist"
	if len(missing) > 1 {
		what = "publications " + sqlgen.QuoteList(missing) + " do not exist"
	}
	has := "which has no publication"
	if len(have) > 0 {
		has = "which has " + sqlgen.QuoteList(have)
	}
	return fmt.Errorf("%s in source database %q, %s: correct --publication, or create it on the source (CREATE PUBLICATION ... FOR TABLE ...)", what, db, has)
}

// checkSlot: the slot exists and can be used, or this start creates it
// (--create-slot, or the initial copy, which creates its own) and the
// source has room for it.
func checkSlot(_ context.Context, s *session, f *preflightFacts) ([]error, error) {
	cfg := s.cfg
	if !f.slotFound {
		switch {
		case !cfg.CreateSlot && !cfg.Copy:
			return []error{fmt.Errorf("replication slot %q does not exist on the source: create it with --create-slot (or SELECT pg_create_logical_replication_slot('%s', 'pgoutput') on the source)", cfg.Slot, cfg.Slot)}, nil
		case f.freeSlots <= 0:
			return []error{fmt.Errorf("the source has no free replication slot for %q: raise max_replication_slots on the source (a restart is needed) or drop a slot no longer used", cfg.Slot)}, nil
		}
		return nil, nil
	}
	st := f.slot
	var problems []error
	switch {
	case st.SlotType != "logical":
		problems = append(problems, fmt.Errorf("replication slot %q is a %s slot; walapply needs a logical pgoutput slot", cfg.Slot, st.SlotType))
	case st.Plugin != "pgoutput":
		problems = append(problems, fmt.Errorf("replication slot %q uses plugin %q; walapply needs a pgoutput slot", cfg.Slot, st.Plugin))
	case st.Database != f.sys.DBName:
		problems = append(problems, fmt.Errorf("replication slot %q belongs to database %q, but the source connection is to database %q: connect to %q or use another --slot", cfg.Slot, st.Database, f.sys.DBName, st.Database))
	}
	if st.TwoPhase && !cfg.TwoPhase {
		problems = append(problems, fmt.Errorf("replication slot %q was created with two-phase decoding and sends prepared transactions at PREPARE: run with --two-phase or use another slot", cfg.Slot))
	}
	return problems, nil
}

// checkSourceOptions: what the source's version cannot do (--origin none
// before 16, --streaming modes before 14 and 16).
func checkSourceOptions(_ context.Context, s *session, f *preflightFacts) ([]error, error) {
	var problems []error
	if err := checkOriginSupport(s.cfg.Origin, f.version); err != nil {
		problems = append(problems, err)
	}
	if _, err := resolveStreaming(s.cfg.Streaming, f.version); err != nil {
		problems = append(problems, err)
	}
	return problems, nil
}

// checkTwoPhase: --two-phase needs a PostgreSQL 15 source and a target that
// can hold prepared transactions.
func checkTwoPhase(ctx context.Context, s *session, f *preflightFacts) ([]error, error) {
	if !s.cfg.TwoPhase {
		return nil, nil
	}
	var problems []error
	if f.version < minTwoPhaseSource {
		problems = append(problems, fmt.Errorf("%w: --two-phase needs PostgreSQL 15 or later on the source, which is %s; run without --two-phase (prepared transactions then arrive at COMMIT PREPARED)", ErrNotSupported, versionString(f.version)))
	}
	n, err := twophase.CheckTarget(ctx, s.control)
	switch {
	case errors.Is(err, twophase.ErrNoPreparedTransactions):
		problems = append(problems, err)
	case err != nil:
		return nil, err
	}
	f.maxPrepared = n
	return problems, nil
}

// checkCopyPlan: what the initial copy would refuse (planCopy), decided
// from what the target records, before the origin exists. initialCopy
// decides again once the origin and the row exist (nothing has changed
// unless another process interfered).
func checkCopyPlan(ctx context.Context, s *session, f *preflightFacts) ([]error, error) {
	cfg := s.cfg
	rec, err := initcopy.ReadRecord(ctx, s.control, cfg.Name)
	if err != nil {
		return nil, err
	}
	if !cfg.Copy && !rec.Exists {
		return nil, nil
	}
	origin, _, err := state.OriginProgress(ctx, s.control, s.origin, false)
	if err != nil {
		return nil, err
	}
	act, err := planCopy(initcopy.Facts{Asked: cfg.Copy, Applier: cfg.Name, Slot: cfg.Slot, Rec: rec,
		SlotFound: f.slotFound, SlotFlush: f.slot.ConfirmedFlush, Origin: origin})
	if err != nil {
		return []error{err}, nil
	}
	f.copyTodo, f.copyResume = act != initcopy.Nothing, act == initcopy.Resume
	return nil, nil
}

// checkCopyTargets: what the initial copy would find wrong with the
// target tables (checkTargetTables: missing tables or columns, tables to
// copy that are not empty), before the origin, the row or the copy's slot
// exist. The copy checks them again in copier.run.
func checkCopyTargets(ctx context.Context, s *session, f *preflightFacts) ([]error, error) {
	if !f.copyTodo || f.schemaCreates {
		return nil, nil // checkSchema looked instead
	}
	cfg := s.cfg
	src, release, err := s.sourceSQL(ctx, "check")
	if err != nil {
		return nil, err
	}
	defer release()
	tables, err := listPublishedTables(ctx, src, cfg.Publications, f.version)
	if err != nil {
		return nil, err
	}
	todo, err := initcopy.Todo(ctx, s.control, cfg.Name, tables, f.copyResume)
	if err != nil {
		return nil, err
	}
	err = checkTargetTables(ctx, s.control, tables, todo)
	var problem *CopyCheckError
	switch {
	case errors.As(err, &problem):
		return []error{problem}, nil
	case err != nil:
		return nil, err
	}
	return nil, nil
}
