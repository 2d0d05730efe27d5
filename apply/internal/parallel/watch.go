package parallel

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/rs/zerolog"
)

// Watch finds the lock waits between the applier's target connections
// that only the run loop could end, and ends them.
//
// A worker's transaction stays open, holding its row locks, until its
// Stream Commit arrives; it waits for the run loop, which PostgreSQL's
// deadlock detector cannot see. So when the main connection, or another
// worker, waits for a lock a worker holds while that worker is idle in its
// transaction, nothing would ever move: the run loop is stuck in the
// waiting statement (or behind a worker's full queue) and cannot deliver
// the messages that would end the holder's transaction. This happens only
// where the target differs from the source (PostgreSQL's leader meets the
// same waits, applyparallelworker.c: a unique index only the target has, a
// REPLICA IDENTITY FULL table with duplicate rows where two transactions
// pick the same one), since on the source the later transaction would have
// waited for the earlier one to end.
//
// Every watchEvery while a worker has a transaction, the watch asks the
// target (pg_blocking_pids) which of the applier's connections wait for a
// worker that is idle in transaction. Seen twice in a row (ripe), the
// holder's backend is terminated: its transaction rolls back, the waiter
// goes on, and the holder's streamed transaction falls back to the spill
// path (see the package doc). Cycles through locks alone (a worker and the
// main connection waiting for each other's rows) PostgreSQL's deadlock
// detector breaks itself: one of them fails with a deadlock error, which
// also falls back (a worker) or reconnects (the main connection).
type Watch struct {
	conn    WatchConn
	log     zerolog.Logger
	mainPID uint32 // the main applying connection's backend

	mu      sync.Mutex
	workers []*Worker
	seen    map[[2]uint32]bool // waiter, holder: seen at the last look
	cancel  context.CancelFunc
	done    chan struct{}
}

// WatchConn is the watch's own connection to the target (a *pgx.Conn).
type WatchConn interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Close(ctx context.Context) error
}

// watchEvery is how often the watch looks.
const watchEvery = 500 * time.Millisecond

// StartWatch starts a watch on conn, which it closes when it stops, for
// the workers of a session whose main connection's backend is mainPID.
func StartWatch(ctx context.Context, conn WatchConn, mainPID uint32, log zerolog.Logger) *Watch {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	lw := &Watch{conn: conn, log: log, mainPID: mainPID, seen: map[[2]uint32]bool{}, cancel: cancel, done: make(chan struct{})}
	go lw.run(wctx)
	return lw
}

func (lw *Watch) add(w *Worker) {
	lw.mu.Lock()
	lw.workers = append(lw.workers, w)
	lw.mu.Unlock()
}

func (lw *Watch) stop() {
	lw.cancel()
	<-lw.done
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lw.conn.Close(ctx)
}

func (lw *Watch) run(ctx context.Context) {
	defer close(lw.done)
	t := time.NewTicker(watchEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := lw.look(ctx); err != nil && ctx.Err() == nil {
			lw.log.Debug().Err(err).Msg("looking for lock waits between the applier's connections")
		}
	}
}

// ripe returns, of this round's (waiter, holder) pairs, those also seen
// in the round before (last), and the pairs to remember for the next.
func ripe(last map[[2]uint32]bool, pairs [][2]uint32) (ends [][2]uint32, seen map[[2]uint32]bool) {
	seen = map[[2]uint32]bool{}
	for _, p := range pairs {
		seen[p] = true
		if last[p] {
			ends = append(ends, p)
		}
	}
	return ends, seen
}

// look is one round of the watch.
func (lw *Watch) look(ctx context.Context) error {
	lw.mu.Lock()
	byPID := map[uint32]*Worker{}
	pids := []uint32{lw.mainPID}
	holders := []uint32{}
	for _, w := range lw.workers {
		if w.xidNow() != 0 && !w.failed.Load() {
			byPID[w.pid] = w
			holders = append(holders, w.pid)
		}
		pids = append(pids, w.pid)
	}
	lw.mu.Unlock()
	if len(holders) == 0 {
		lw.seen = map[[2]uint32]bool{}
		return nil
	}
	// A prepared transaction holding the lock shows as pid 0: a worker
	// waiting for one is ended itself (the prepared transaction may wait
	// for a COMMIT PREPARED behind the worker's transaction in the stream).
	rows, err := lw.conn.Query(ctx, `SELECT w.pid, CASE b.pid WHEN 0 THEN w.pid ELSE b.pid END FROM pg_catalog.unnest($1::int[]) AS w(pid)
		CROSS JOIN LATERAL pg_catalog.unnest(pg_catalog.pg_blocking_pids(w.pid)) AS b(pid)
		LEFT JOIN pg_catalog.pg_stat_activity h ON h.pid = b.pid
		WHERE (b.pid = ANY ($2::int[]) AND h.state = 'idle in transaction') OR (b.pid = 0 AND w.pid = ANY ($2::int[]))`, pids, holders)
	if err != nil {
		return err
	}
	pairs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]uint32, error) {
		var p [2]int32
		err := r.Scan(&p[0], &p[1])
		return [2]uint32{uint32(p[0]), uint32(p[1])}, err
	})
	if err != nil {
		return err
	}
	ends, seen := ripe(lw.seen, pairs)
	for _, p := range ends {
		w := byPID[p[1]]
		if w == nil || w.failed.Load() {
			continue
		}
		w.fail(errors.New("another of the applier's connections waits for a lock its transaction holds, which only its commit would release (a lock wait the source did not have)"))
		lw.log.Warn().Uint32("waiting_pid", p[0]).Uint32("holding_pid", p[1]).Uint32("xid", w.xidNow()).Int("worker", w.id).
			Msg("lock wait between the applier's connections: ending the parallel connection's transaction; it falls back to the spill path")
		if _, err := lw.conn.Exec(ctx, "SELECT pg_catalog.pg_terminate_backend($1)", int32(p[1])); err != nil {
			return err
		}
	}
	lw.seen = seen
	return nil
}
