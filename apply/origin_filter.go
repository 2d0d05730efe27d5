package apply

import (
	"fmt"
	"strings"

	"github.com/walapply/walapply/protocol"
)

// Origin filter values of Config.Origin.
const (
	OriginAny  = "any"
	OriginNone = "none"
)

// originMinVersion is the first source version with pgoutput's origin
// option (server_version_num).
const originMinVersion = 160000

// checkOriginConfig validates and normalises Config.Origin ("" means any;
// the server accepts either case, so do we).
//
// Origin filtering and origin reporting.
//
// Every transaction walapply applies is written under its replication
// origin on the target (DESIGN.md invariant 8), so the target's WAL marks
// those changes as replicated. A source of PostgreSQL 16 or later can leave
// such changes out of the stream when the subscriber asks for pgoutput's
// origin = 'none': only changes made on the source itself are sent. That is
// the whole mechanism behind bidirectional replication without loops (A ↔ B:
// each side sends only its own writes) and behind cascades that must not
// forward (A → B → C with origin = 'none' on the second hop carries only B's
// own writes). With origin = 'any', the default and the only behaviour
// before PostgreSQL 16, a transaction that came from elsewhere is preceded
// by an Origin message naming the origin it was written under; the
// transaction machine checks where it may appear (inside the transaction,
// before any change) and the run loop reports the name through
// Progress.LastOrigin. The applied transaction itself is written under this
// applier's own origin, as PostgreSQL's subscriber does: the original
// origin is not carried over, so a cascade's last hop sees the middle
// node's applier as the origin of A's changes.
func checkOriginConfig(cfg *Config) error {
	switch o := strings.ToLower(strings.TrimSpace(cfg.Origin)); o {
	case "", OriginAny:
		cfg.Origin = OriginAny
	case OriginNone:
		cfg.Origin = OriginNone
	default:
		return fmt.Errorf("%w: --origin %q: want any (replicate every change) or none (only changes made on the source itself; PostgreSQL 16+)", ErrConfig, cfg.Origin)
	}
	return nil
}

// checkOriginSupport refuses origin = none against a source that cannot
// filter, before anything is created on it (a slot made by --create-slot
// and then never used would hold the source's WAL forever). The error is
// permanent: no retry makes an old server filter.
func checkOriginSupport(origin string, serverVersion int) error {
	if origin != OriginNone || serverVersion >= originMinVersion {
		return nil
	}
	return &PermanentError{Err: fmt.Errorf("--origin none needs a source running PostgreSQL 16 or later, and this source runs %s: "+
		"older servers send every change, including those replicated into them from elsewhere, so they cannot break a replication loop; "+
		"use --origin any (and no bidirectional setup with this source; see docs/TOPOLOGIES.md): %w",
		versionString(serverVersion), protocol.ErrUnsupported)}
}

// versionString renders a server_version_num (150014 → "15.14").
func versionString(v int) string {
	return fmt.Sprintf("%d.%d", v/10000, v%10000)
}
