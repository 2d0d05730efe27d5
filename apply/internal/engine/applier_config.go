package engine

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/protocol"
)

// Options is the part of Config the applier reads, filled by the run
// loop (engineConfigOf) and by the tests; the applier sees no Config
// (issue 19: the step before it moves to its own package). Its zero value
// is an applier that writes each transaction in a target transaction of
// its own, change by change, with PostgreSQL's conflict policies.
type Options struct {
	Binary bool // the source sends binary values (Config.Binary)
	// Grouping: group commit (Group, group.go), off with
	// Config.NoGroupCommit; none for transactions up to NoGroupThrough,
	// Run's retry of a failed group. GroupMaxWait is Config.GroupMaxWait.
	Grouping       bool
	NoGroupThrough protocol.LSN
	GroupMaxWait   time.Duration
	Compaction     bool             // net-effect compaction, off with Config.NoCompaction
	Name           string           // the applier's name, in conflict records
	Policies       ConflictPolicies // nil: defaultPolicies
	SkipLSN        protocol.LSN     // --skip-lsn (skip.go), 0 for none
}

// Dialer opens the connections the applier makes beside the one it
// applies on: to the target, to repair an origin after a failed PREPARE
// on a lost connection (rewindOnNewConn); to the source, for --ddl's
// questions (DDLState.sourceConn). role names the connection
// (application_name "walapply <name> <role>"). The session's
// configDialer opens them as apply.Config says (apply/session_engine.go); the
// transcript tests have none.
type Dialer interface {
	Target(ctx context.Context, role string) (*pgx.Conn, error)
	Source(ctx context.Context, role string) (*pgx.Conn, error)
}
