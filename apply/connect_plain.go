package apply

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// dialPlain opens the session's plain (not replication) source connection
// for the catalog queries of its start: the privilege check, the copy's
// and the schema's checks, the list of the tables published now
// (sourceSQL). It opens in the background with the replication connection
// and the target's (session.connect), and closes when the start ends.
//
// Each of those used to open a connection of its own, one after the
// other, while the start waited: two or three source backends started
// and ended per start, 10–15 ms each on loopback, the largest part of a
// start of 60–90 ms. A drain of a short backlog (the toast benchmark's
// takes 0.2–0.35 s) paid them every time, as does every reconnect.
func (s *session) dialPlain(ctx context.Context) *dial[*pgx.Conn] {
	cfg := s.cfg
	return startDial(ctx, func(ctx context.Context) (*pgx.Conn, error) { return connectSource(ctx, cfg, "check") })
}

// sourceSQL returns a plain source connection and what to call when done
// with it: during the start, the shared one (release does nothing; the
// start's end closes it), afterwards a new one named role, which release
// closes.
func (s *session) sourceSQL(ctx context.Context, role string) (*pgx.Conn, func(), error) {
	if s.plain != nil {
		conn, err := s.plain.wait(ctx)
		return conn, func() {}, err
	}
	conn, err := connectSource(ctx, s.cfg, role)
	if err != nil {
		return nil, nil, err
	}
	return conn, func() { conn.Close(context.WithoutCancel(ctx)) }, nil
}

// closePlain ends the start's plain source connection, or its dial
// (dial.discard), and makes sourceSQL open connections of their own from
// then on.
func (s *session) closePlain() {
	if s.plain != nil {
		s.plain.discard()
		s.plain = nil
	}
}
