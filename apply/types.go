package apply

import "github.com/walapply/walapply/apply/internal/engine"

// Stats counts what the applier did (engine.Stats).
type Stats = engine.Stats

// ConflictStats counts conflicts by kind (engine.ConflictStats).
type ConflictStats = engine.ConflictStats

// ConflictKinds are the kinds ConflictStats counts (engine.ConflictKinds).
func ConflictKinds() []string { return engine.ConflictKinds() }

// TxnError is a failure while applying one source transaction
// (engine.TxnError).
type TxnError = engine.TxnError

// PermanentError marks an error that retrying cannot fix
// (engine.PermanentError).
type PermanentError = engine.PermanentError

// SchemaError says the target's schema does not fit what the source sends
// (engine.SchemaError).
type SchemaError = engine.SchemaError

// ConflictError stops the applier on a conflict whose policy is error
// (engine.ConflictError).
type ConflictError = engine.ConflictError

// DDLError is a captured DDL statement that failed on the target
// (engine.DDLError).
type DDLError = engine.DDLError

// SpillError is a failure to write, read or remove the spill file of a
// streamed transaction (engine.SpillError).
type SpillError = engine.SpillError

// ErrConfig is wrapped by every configuration error.
var ErrConfig = engine.ErrConfig

// ErrNotSupported is returned for stream features this build does not apply.
var ErrNotSupported = engine.ErrNotSupported

// ConflictPolicies maps each conflict kind to its policy
// (engine.ConflictPolicies, where conflicts are described).
type ConflictPolicies = engine.ConflictPolicies

// ParseConflictPolicies parses --on-conflict's list, kind=policy,...
// (engine.ParseConflictPolicies).
func ParseConflictPolicies(s string) (ConflictPolicies, error) {
	return engine.ParseConflictPolicies(s)
}

// Conflict kinds.
const (
	ConflictInsertExists  = engine.ConflictInsertExists
	ConflictUpdateExists  = engine.ConflictUpdateExists
	ConflictUpdateMissing = engine.ConflictUpdateMissing
	ConflictDeleteMissing = engine.ConflictDeleteMissing
)

// Conflict policies.
const (
	PolicyError = engine.PolicyError
	PolicySkip  = engine.PolicySkip
	PolicyApply = engine.PolicyApply
)

// Operation names: how TxnError.Op, the errors and the log spell what was
// being applied (engine.OpBegin and the rest).
const (
	OpBegin            = engine.OpBegin
	OpInsert           = engine.OpInsert
	OpUpdate           = engine.OpUpdate
	OpDelete           = engine.OpDelete
	OpTruncate         = engine.OpTruncate
	OpCommit           = engine.OpCommit
	OpOriginProgress   = engine.OpOriginProgress
	OpCopy             = engine.OpCopy
	OpInitialCopy      = engine.OpInitialCopy
	OpPrepare          = engine.OpPrepare
	OpCommitPrepared   = engine.OpCommitPrepared
	OpRollbackPrepared = engine.OpRollbackPrepared
	OpDDL              = engine.OpDDL
)
