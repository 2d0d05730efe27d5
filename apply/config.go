package apply

import (
	"fmt"
	"regexp"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/walapply/walapply/apply/internal/engine"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/state"
	"github.com/walapply/walapply/twophase"
)

// Config says what to replicate from where to where.
type Config struct {
	// Source and Target are ordinary connection strings (URL or key=value);
	// walapply adds the replication parameter for the source itself.
	Source string
	Target string
	// Slot is the source's pgoutput replication slot; CreateSlot creates it
	// when it does not exist.
	Slot       string
	CreateSlot bool
	// Publications to replicate.
	Publications []string
	// Name names this applier (default: the slot name) and, from it, the
	// target's replication origin.
	Name string
	// Streaming is "off", "on" (streamed transactions are spilled and
	// applied at their commit, internal/engine/stream.go) or "parallel" (applied as they
	// stream on up to ParallelWorkers connections of their own, default 2,
	// internal/engine/stream_parallel.go); "" means "on" where the source supports it
	// (PostgreSQL 14+). TwoPhase asks for two-phase decoding.
	Streaming       string
	ParallelWorkers int
	TwoPhase        bool
	// Failover creates the slot failover-enabled (PostgreSQL 17+), or
	// enables failover on an existing one, so that standbys synchronise it
	// (see failover.go).
	Failover bool
	// GIDMode chooses the GIDs of prepared transactions on the target (see
	// twophase.Mode); the default derives them from Name and the source xid.
	GIDMode twophase.Mode
	// Binary asks for binary-format values where the source can send them.
	Binary bool
	// Copy runs the initial copy before streaming (copy.go): the slot is
	// created with an exported snapshot, every published table's rows are
	// copied into the target in that snapshot, and streaming starts at the
	// slot's consistent point. An interrupted copy resumes with the tables
	// that did not finish; a finished one is not repeated. CopyWorkers
	// tables, or ranges of big tables (CopySplitSize), are copied at once
	// (default 2). OnCopyProgress, if set, is
	// called during the copy (after each table, and about every second);
	// it must not block for long.
	Copy           bool
	CopyWorkers    int
	OnCopyProgress func(CopyProgress)
	// Schema (with Copy) creates the published tables and what they need
	// on the target from the source's pg_dump (schema.go): the pre-data
	// section before the copy, the post-data one (indexes, constraints,
	// triggers) after it, IndexWorkers index builds at a time (default
	// 2). PgDump is pg_dump's path (default: on PATH, or pg_config
	// --bindir).
	Schema       bool
	IndexWorkers int
	PgDump       string
	// IndexMemory is the maintenance_work_mem, in bytes, that each
	// connection building the post-data section asks for at least
	// (schema_memory.go): 0 for the default, 256 MiB; negative: the
	// target's own setting. A higher setting of the target's is kept.
	IndexMemory int64
	// CopySplitSize is the source relation size (bytes, pg_relation_size)
	// above which a table is copied in ranges by several workers at once
	// (internal/initcopy/ranges.go): 0 for the default, 256 MiB with Schema and 1 GiB
	// without, and smaller tables too where one would keep the copy waiting
	// with workers idle (internal/initcopy/balance.go); negative: never.
	CopySplitSize int64
	// splitDefault, when positive, replaces both of CopySplitSize's
	// defaults: the seam (SetSplitDefault) through which tests copy small
	// tables as the default would big ones (internal/initcopy/whole.go).
	splitDefault int64
	// balanceMin, when positive, replaces the smallest range the copy's
	// balancing cuts (internal/initcopy/balance.go, 64 MiB): the seam
	// (SetBalanceMin) through which tests balance small tables.
	balanceMin int64
	// CopyFormat is the initial copy's COPY format: "auto" (or "") copies
	// a table in binary where every column's type is the same on both
	// sides, else in text (copy_format.go); "text" always in text.
	CopyFormat string
	// Origin filters changes by where they came from: "none" asks the
	// source (PostgreSQL 16+) for only the changes made on it, leaving out
	// those that were themselves replicated into it under a replication
	// origin (by walapply or a subscription), which is what lets two
	// databases replicate to each other without changes going round in
	// circles; "any" (the default, also "") sends everything. See
	// docs/TOPOLOGIES.md.
	Origin string
	// SpillDir is where streamed transactions are spilled (default:
	// $XDG_STATE_HOME/walapply/<name>/spill, or under ~/.local/state).
	SpillDir string
	// spillFS is the filesystem it is on (default state.OSFS; tests inject
	// faults through internal/spillfs.FaultFS, with SetSpillFS).
	spillFS state.FS
	// AllowTimelineChange continues on a source timeline that the start
	// refuses (timeline.go: its history lacks transactions the target
	// applied, or cannot be read), with a warning saying so. A new
	// timeline that contains everything applied is followed without it.
	AllowTimelineChange bool

	// GroupCommit folds consecutive source transactions into one target
	// transaction (see internal/engine/applier_group.go); on by default through NoGroupCommit.
	NoGroupCommit bool
	// Conflicts sets a policy per conflict kind (internal/engine/conflict.go); kinds left
	// out keep PostgreSQL's behaviour.
	Conflicts ConflictPolicies
	// SkipLSN skips the source transaction whose commit LSN it is (prepare
	// LSN for a prepared one), as ALTER SUBSCRIPTION ... SKIP does: its
	// changes are not applied, the origin moves past it, and the skip is
	// logged and recorded in walapply.conflicts. Use the commit LSN an
	// error named. It is used once: refused at or below the origin's
	// progress, ignored with a warning once used or passed (internal/engine/skip.go).
	SkipLSN protocol.LSN

	// Until stops the run once every source transaction that commits at
	// or before it is applied and durable on the target, without applying
	// any after it (until.go); Run then returns nil. UntilNow sets it to
	// the source's current LSN when the run starts; each value received on
	// UntilNowRequests does the same while it runs (the earlier position
	// wins). OnUntilReached, if set, is called with where the run stopped.
	Until            protocol.LSN
	UntilNow         bool
	UntilNowRequests <-chan struct{}
	OnUntilReached   func(UntilReached)

	// DDL applies the DDL statements the source captures (walapply ddl
	// install) at their place in the stream (internal/engine/ddl_apply.go).
	DDL bool

	// NoCompaction turns off net-effect compaction within groups
	// (compact.go): every source change becomes its own statement.
	NoCompaction bool
	// GroupMaxWait bounds how long a group stays open (default 50ms).
	GroupMaxWait time.Duration

	// noGroupThrough disables grouping up to a failed transaction, for
	// the retry after a permanent error in a group.
	noGroupThrough protocol.LSN
	// createdSlot: this run created the slot (--create-slot) and has not
	// replicated from it yet; if the run ends before it does, the slot is
	// dropped again (dropCreatedSlot).
	createdSlot bool
	// reached is set once a session of this run reached both servers
	// (connect_retry.go); Run allocates it.
	reached *atomic.Bool
	// leaseBackend is the target backend of the control connection that
	// last took the running-applier lock in this run (lease.go).
	leaseBackend uint32
	// newTables are the tables sessions stopped for as newly published
	// (refresh.go).
	newTables []sqlgen.Rel
	// spillXids are the streamed transactions that fell back from
	// --streaming parallel to the spill path (session_stream.go).
	spillXids map[uint32]bool
	// openParallel are the transactions applied as they streamed when the
	// last session ended.
	openParallel []uint32
	// parallelCommitted, in tests, runs right after a worker committed and
	// before the applier's origin follows; an error ends the session there,
	// as a crash would (internal/engine/stream_parallel.go).
	parallelCommitted func(xid uint32) error

	// ConnectTimeout bounds how long Run tries to reach the target and the
	// source at its start: once it has passed without both answering, Run
	// returns a PermanentError naming the last failure. 0 retries for ever,
	// logging each retry with the time spent and the next attempt. Once
	// both servers were reached, lost connections are retried for ever
	// whatever its value (connect_retry.go).
	ConnectTimeout time.Duration

	// FeedbackInterval is how often positions are confirmed to the source
	// (default 1s). ProgressInterval is how often a progress line is logged
	// (default 10s; negative: never).
	FeedbackInterval time.Duration
	ProgressInterval time.Duration

	// Logger receives the log; the zero value logs nothing.
	Logger zerolog.Logger
	// OnProgress, if set, is called from the run loop after every feedback
	// round with the current positions. It must not block.
	OnProgress func(Progress)
	// Observer, if set, watches the run: for metrics and probes (observe.go).
	Observer Observer
}

// Progress is a snapshot of where the applier is.
type Progress struct {
	Received      protocol.LSN // the furthest source position received
	Applied       protocol.LSN // end LSN of the last applied source transaction
	Flushed       protocol.LSN // confirmed to the source as durable on the target
	LastCommitAt  time.Time    // source commit time of the last applied transaction
	Connected     bool
	InTransaction bool
	TxnsApplied   int64
	Commits       int64 // target commits (group commit makes them fewer)
	Rows          int64
	// LastOrigin names the replication origin the source reported (in an
	// Origin message) for the last transaction it sent in full since the
	// applier connected: empty when that transaction was made on the
	// source itself, the writer's origin name (e.g. "walapply_<name>" or
	// "pg_<subscription oid>") when it had been replicated into the
	// source. Never set with Origin "none", which filters such
	// transactions out.
	LastOrigin string
}

var slotNameRE = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)

func (c *Config) withDefaults() (Config, error) {
	cfg := *c
	if cfg.Source == "" {
		return cfg, fmt.Errorf("%w: no source connection string (--source or WALAPPLY_SOURCE)", ErrConfig)
	}
	if cfg.Target == "" {
		return cfg, fmt.Errorf("%w: no target connection string (--target or WALAPPLY_TARGET)", ErrConfig)
	}
	if !slotNameRE.MatchString(cfg.Slot) {
		return cfg, fmt.Errorf("%w: slot name %q: PostgreSQL slot names are 1 to 63 characters of a-z, 0-9 and _", ErrConfig, cfg.Slot)
	}
	if len(cfg.Publications) == 0 {
		return cfg, fmt.Errorf("%w: no publication (--publication or WALAPPLY_PUBLICATION)", ErrConfig)
	}
	for _, p := range cfg.Publications {
		if p == "" {
			return cfg, fmt.Errorf("%w: empty publication name", ErrConfig)
		}
	}
	if cfg.Name == "" {
		cfg.Name = cfg.Slot
	}
	if err := checkOriginConfig(&cfg); err != nil {
		return cfg, err
	}
	if err := checkStreamingConfig(&cfg); err != nil {
		return cfg, err
	}
	if err := checkParallelConfig(&cfg); err != nil { // session_stream.go
		return cfg, err
	}
	if err := checkTwoPhaseConfig(&cfg); err != nil {
		return cfg, err
	}
	if err := checkCopyFormat(&cfg); err != nil {
		return cfg, err
	}
	policies, err := engine.PoliciesWithDefaults(cfg.Conflicts)
	if err != nil {
		return cfg, err
	}
	cfg.Conflicts = policies
	if cfg.GroupMaxWait <= 0 {
		cfg.GroupMaxWait = 50 * time.Millisecond
	}
	if cfg.FeedbackInterval <= 0 {
		cfg.FeedbackInterval = time.Second
	}
	if cfg.ProgressInterval == 0 {
		cfg.ProgressInterval = 10 * time.Second
	}
	return cfg, nil
}
