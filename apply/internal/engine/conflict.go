package engine

import (
	"fmt"
	"sort"
	"strings"
)

// Conflict kinds.
const (
	ConflictInsertExists  = "insert_exists"
	ConflictUpdateExists  = "update_exists"
	ConflictUpdateMissing = "update_missing"
	ConflictDeleteMissing = "delete_missing"
)

// SkippedByUser is the kind under which a transaction skipped with
// --skip-lsn is counted and recorded beside the conflicts.
const SkippedByUser = "skipped_by_user"

// Conflict policies.
const (
	PolicyError = "error"
	PolicySkip  = "skip"
	PolicyApply = "apply"
)

// ConflictPolicies maps each conflict kind to its policy.
//
// Conflicts. A change that does not fit the target's rows is a conflict,
// named as PostgreSQL 18's subscriber names them:
//
//	insert_exists   an INSERT whose key is already there
//	update_exists   an UPDATE whose new key is already taken by another row
//	update_missing  an UPDATE that finds no row to change
//	delete_missing  a DELETE that finds no row to delete
//
// Each kind has a policy: error (stop, with nothing of the transaction
// applied), skip (leave the target as it is), or apply (make the target
// match the source: an upsert for insert_exists, the new row inserted for
// update_missing when its full image is known, the other row removed for
// update_exists). The defaults are PostgreSQL's: insert_exists and
// update_exists stop, update_missing and delete_missing are skipped.
//
// A conflict that is skipped or applied is logged with the row's key,
// counted (Stats.Conflicts) and recorded in walapply.conflicts by the very
// statement that meets it: the change is wrapped in a common table
// expression whose outer INSERT writes the record only for the rows that
// conflicted, and returns their keys for the log. The record therefore
// commits or rolls back with the change it describes.
//
// update_exists is recognised for the replica identity key only (a row
// whose key changes onto another row's key); other unique indexes still
// stop the applier with the target's error.
type ConflictPolicies map[string]string

// defaultPolicies are PostgreSQL's subscriber's behaviour.
func defaultPolicies() ConflictPolicies {
	return ConflictPolicies{
		ConflictInsertExists:  PolicyError,
		ConflictUpdateExists:  PolicyError,
		ConflictUpdateMissing: PolicySkip,
		ConflictDeleteMissing: PolicySkip,
	}
}

// ParseConflictPolicies parses "kind=policy,kind=policy" (the --on-conflict
// flag) over the defaults.
func ParseConflictPolicies(s string) (ConflictPolicies, error) {
	p := defaultPolicies()
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		kind, policy, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("%w: conflict policy %q: want kind=policy", ErrConfig, item)
		}
		if err := p.set(strings.TrimSpace(kind), strings.TrimSpace(policy)); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (p ConflictPolicies) set(kind, policy string) error {
	if _, ok := defaultPolicies()[kind]; !ok {
		return fmt.Errorf("%w: unknown conflict kind %q: want insert_exists, update_exists, update_missing or delete_missing", ErrConfig, kind)
	}
	switch policy {
	case PolicyError, PolicySkip, PolicyApply:
	default:
		return fmt.Errorf("%w: conflict policy %q for %s: want error, skip or apply", ErrConfig, policy, kind)
	}
	p[kind] = policy
	return nil
}

// PoliciesWithDefaults fills in the kinds p leaves out.
func PoliciesWithDefaults(p ConflictPolicies) (ConflictPolicies, error) {
	out := defaultPolicies()
	for k, v := range p {
		if err := out.set(k, v); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// String renders the policies as the flag takes them.
func (p ConflictPolicies) String() string {
	var parts []string
	for k, v := range p {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
