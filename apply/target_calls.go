package apply

import (
	"context"
	"io"
	"time"

	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/state"
	"github.com/walapply/walapply/twophase"
)

// The calls of target (applier_target.go) that targetSession makes outside
// a batch, and the small ones the applier needs besides the queue.

func (s *targetSession) queue() *stmtQueue { return &s.stmtQueue }

func (s *targetSession) queueExec(q queuedStmt, sql string, params [][]byte, oids []uint32, formats []int16) {
	s.batch.ExecParams(sql, params, oids, formats, nil)
	s.queued = append(s.queued, q)
}

func (s *targetSession) lost() bool { return s.pg.IsClosed() }

func (s *targetSession) exec(ctx context.Context, sql string) error {
	_, err := s.pg.Exec(ctx, sql).ReadAll()
	return err
}

func (s *targetSession) copyFrom(ctx context.Context, r io.Reader, sql string) error {
	_, err := s.pg.CopyFrom(ctx, r, sql)
	return err
}

func (s *targetSession) isPrepared(ctx context.Context, gid string) (bool, error) {
	return twophase.IsPrepared(ctx, s.conn, gid)
}

func (s *targetSession) xactSetupIfPrepared(ctx context.Context, end protocol.LSN, at time.Time, gid string) (bool, error) {
	tag, err := s.conn.Exec(ctx, state.XactSetupIfPreparedSQL, end.String(), at, gid)
	return tag.RowsAffected() > 0, err
}

func (s *targetSession) xactReset(ctx context.Context) error { return state.XactReset(ctx, s.conn) }

func (s *targetSession) originName() string { return s.origin }

func (s *targetSession) rewindOrigin(ctx context.Context, to protocol.LSN) (protocol.LSN, error) {
	return state.RewindOrigin(ctx, s.conn, s.origin, to, true)
}

func (s *targetSession) catalog() relmap.Catalog { return queryCatalog{s.conn} }
