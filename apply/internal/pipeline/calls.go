package pipeline

import (
	"context"
	"io"
	"time"

	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/state"
	"github.com/walapply/walapply/twophase"
)

// The calls of engine.Target (apply/internal/engine/applier_target.go) that Session makes outside
// a batch, and the small ones the applier needs besides the queue.

func (s *Session) Queue() *StmtQueue { return &s.StmtQueue }

func (s *Session) QueueExec(q Stmt, sql string, params [][]byte, oids []uint32, formats []int16) {
	s.batch.ExecParams(sql, params, oids, formats, nil)
	s.Queued = append(s.Queued, q)
}

func (s *Session) Lost() bool { return s.pg.IsClosed() }

func (s *Session) Exec(ctx context.Context, sql string) error {
	_, err := s.pg.Exec(ctx, sql).ReadAll()
	return err
}

func (s *Session) CopyFrom(ctx context.Context, r io.Reader, sql string) error {
	_, err := s.pg.CopyFrom(ctx, r, sql)
	return err
}

func (s *Session) IsPrepared(ctx context.Context, gid string) (bool, error) {
	return twophase.IsPrepared(ctx, s.conn, gid)
}

func (s *Session) XactSetupIfPrepared(ctx context.Context, end protocol.LSN, at time.Time, gid string) (bool, error) {
	tag, err := s.conn.Exec(ctx, state.XactSetupIfPreparedSQL, end.String(), at, gid)
	return tag.RowsAffected() > 0, err
}

func (s *Session) XactReset(ctx context.Context) error { return state.XactReset(ctx, s.conn) }

func (s *Session) OriginName() string { return s.origin }

func (s *Session) RewindOrigin(ctx context.Context, to protocol.LSN) (protocol.LSN, error) {
	return state.RewindOrigin(ctx, s.conn, s.origin, to, true)
}

func (s *Session) Catalog() relmap.Catalog { return QueryCatalog{s.conn} }
