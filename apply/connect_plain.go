package apply

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// plainDial is the session's plain (not replication) source connection
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
type plainDial struct {
	done   chan struct{}
	conn   *pgx.Conn
	err    error
	cancel context.CancelFunc
}

// dialPlain starts opening the start's plain source connection.
func (s *session) dialPlain(ctx context.Context) *plainDial {
	dctx, cancel := context.WithCancel(ctx)
	d := &plainDial{done: make(chan struct{}), cancel: cancel}
	cfg := s.cfg
	go func() {
		defer close(d.done)
		d.conn, d.err = connectSource(dctx, cfg, "check")
	}()
	return d
}

// sourceSQL returns a plain source connection and what to call when done
// with it: during the start, the shared one (release does nothing; the
// start's end closes it), afterwards a new one named role, which release
// closes.
func (s *session) sourceSQL(ctx context.Context, role string) (*pgx.Conn, func(), error) {
	if d := s.plain; d != nil {
		select {
		case <-d.done:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		if d.err != nil {
			return nil, nil, d.err
		}
		return d.conn, func() {}, nil
	}
	conn, err := connectSource(ctx, s.cfg, role)
	if err != nil {
		return nil, nil, err
	}
	return conn, func() { conn.Close(context.WithoutCancel(ctx)) }, nil
}

// closePlain ends the start's plain source connection, or its dial, and
// makes sourceSQL open connections of their own from then on. It does
// not wait for a dial still under way.
func (s *session) closePlain() {
	d := s.plain
	if d == nil {
		return
	}
	s.plain = nil
	d.cancel()
	end := func() {
		<-d.done
		if d.conn != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = d.conn.Close(ctx)
		}
	}
	select {
	case <-d.done:
		end() // opened: ended now, as a connection of its own was
	default:
		go end() // still dialling: ended when the cancelled dial returns
	}
}
