package apply

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/apply/internal/engine"
	"github.com/walapply/walapply/protocol"
)

// checkSkip runs the start check of cfg.SkipLSN against the origin's progress
// and the uses recorded on the target (the I/O), and arms the applier with
// its result (applier.armSkip, the decision).
func (s *session) checkSkip(ctx context.Context, origin protocol.LSN) error {
	flag := s.cfg.SkipLSN
	if flag == 0 {
		return s.applier.ArmSkip(0, origin, s.origin, nil)
	}
	used, err := lookupSkip(ctx, s.control, s.cfg.Name, flag)
	if err != nil {
		return err
	}
	return s.applier.ArmSkip(flag, origin, s.origin, used)
}

// lookupSkip finds the recorded use of skip LSN lsn by applier name.
func lookupSkip(ctx context.Context, conn *pgx.Conn, name string, lsn protocol.LSN) (*engine.SkipUse, error) {
	var kind, commit string
	var xid int64
	var at time.Time
	err := conn.QueryRow(ctx, `SELECT kind, COALESCE(source_xid, 0), COALESCE(commit_lsn::text, '0/0'), recorded_at FROM walapply.conflicts
		WHERE applier = $1 AND ((kind = $2 AND commit_lsn = $4::text::pg_catalog.pg_lsn) OR (kind = $3 AND key = $4::text))
		ORDER BY id DESC LIMIT 1`, name, engine.SkippedByUser, engine.SkipKindPassed, lsn.String()).Scan(&kind, &xid, &commit, &at)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("looking up earlier uses of --skip-lsn %s in walapply.conflicts on the target: %w", lsn, err)
	}
	c, err := protocol.ParseLSN(commit)
	if err != nil {
		return nil, fmt.Errorf("walapply.conflicts on the target: %w", err)
	}
	return &engine.SkipUse{Passed: kind == engine.SkipKindPassed, Xid: uint32(xid), CommitLSN: c, At: at}, nil
}
