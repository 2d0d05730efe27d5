//go:build linux

package apply_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/testenv"
)

// tortureWorkload is the torture test's load on the source: clients that
// each run, at random, small transactions, big ones (which the source
// streams, logical_decoding_work_mem being 64kB), some with a rolled-back
// savepoint, and prepared transactions of both sizes, committed or rolled
// back by COMMIT/ROLLBACK PREPARED; a few of the others roll back too.
//
// Every client writes only rows of its own (ids from its own range), so the
// clients never wait for one another. The source is restarted under them:
// a client whose connection breaks reconnects and finishes the prepared
// transaction it may have left (every one ends with COMMIT or ROLLBACK
// PREPARED, as the end check demands). Whether the interrupted transaction
// committed does not matter: the source's rows are the reference.
type tortureWorkload struct {
	src    *testenv.Cluster
	tables []string
	end    time.Time

	small, big, savepoints, rolledBack         atomic.Int64
	prepared, commitPrepared, rollbackPrepared atomic.Int64
	broken                                     atomic.Int64 // transactions interrupted by a fault
}

func (w *tortureWorkload) summary() string {
	return fmt.Sprintf("%d small and %d big (streamed) transactions, %d with a rolled-back savepoint, %d rolled back; "+
		"%d prepared (%d COMMIT PREPARED, %d ROLLBACK PREPARED); %d interrupted by faults",
		w.small.Load(), w.big.Load(), w.savepoints.Load(), w.rolledBack.Load(),
		w.prepared.Load(), w.commitPrepared.Load(), w.rollbackPrepared.Load(), w.broken.Load())
}

// run runs clients until w.end and returns the first error that is not a
// fault's doing.
func (w *tortureWorkload) run(ctx context.Context, clients int, seed uint64) error {
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		c := &tortureClient{w: w, id: i + 1, rng: rand.New(rand.NewPCG(seed, uint64(i)))}
		wg.Go(func() {
			if err := c.run(ctx); err != nil {
				errs <- fmt.Errorf("workload client %d: %w", c.id, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

type tortureClient struct {
	w    *tortureWorkload
	id   int
	rng  *rand.Rand
	conn *pgx.Conn
	seq  int64
	gids int
	// recent are ids this client inserted, for its updates and deletes.
	recent []rowRef
	// pending is a prepared transaction whose outcome has not been
	// confirmed yet.
	pending *pendingOutcome
}

type rowRef struct {
	table string
	id    int64
}

type pendingOutcome struct {
	gid    string
	commit bool
}

func (c *tortureClient) run(ctx context.Context) error {
	defer func() {
		if c.conn != nil {
			c.conn.Close(context.Background())
		}
	}()
	for time.Now().Before(c.w.end) {
		if c.conn == nil {
			if err := c.reconnect(ctx); err != nil {
				return err
			}
		}
		err := c.step(ctx)
		if err == nil {
			continue
		}
		if !faultError(err) {
			return err
		}
		c.w.broken.Add(1)
		c.conn.Close(context.Background())
		c.conn = nil
	}
	if c.conn == nil && c.pending != nil {
		return c.reconnect(ctx)
	}
	return nil
}

// faultError tells an error a fault caused (the source went away) from a
// bug in the workload.
func faultError(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "57P")
	}
	return true // the connection broke
}

// reconnect connects again and finishes the pending prepared transaction,
// if it was prepared.
func (c *tortureClient) reconnect(ctx context.Context) error {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		err := c.tryReconnect(ctx)
		if err == nil {
			return nil
		}
		if !faultError(err) || time.Now().After(deadline) {
			return fmt.Errorf("reconnecting to the source: %w", err)
		}
		if c.conn != nil {
			c.conn.Close(context.Background())
			c.conn = nil
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (c *tortureClient) tryReconnect(ctx context.Context) error {
	conn, err := c.w.src.Connect(ctx, "postgres")
	if err != nil {
		return err
	}
	c.conn = conn
	if c.pending == nil {
		return nil
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_prepared_xacts WHERE gid = $1", c.pending.gid).Scan(&n); err != nil {
		return err
	}
	if n == 0 { // never prepared (or finished before the fault)
		c.pending = nil
		return nil
	}
	return c.finish(ctx)
}

// finish runs the pending transaction's outcome.
func (c *tortureClient) finish(ctx context.Context) error {
	p := c.pending
	verb := "ROLLBACK PREPARED"
	if p.commit {
		verb = "COMMIT PREPARED"
	}
	if _, err := c.conn.Exec(ctx, verb+" '"+p.gid+"'"); err != nil {
		return err
	}
	if p.commit {
		c.w.commitPrepared.Add(1)
	} else {
		c.w.rollbackPrepared.Add(1)
	}
	c.pending = nil
	return nil
}

// step runs one transaction of a random kind.
func (c *tortureClient) step(ctx context.Context) error {
	var body []string
	big := false
	// A pause between transactions keeps the load within what the applier
	// can follow on two cores while faults keep interrupting it.
	time.Sleep(time.Duration(10+c.rng.IntN(40)) * time.Millisecond)
	switch r := c.rng.IntN(100); {
	case r < 55:
		body = c.smallBody()
	case r < 61:
		body, big = c.bigBody(), true
	case r < 96:
		return c.prepared(ctx, c.smallBody(), false)
	default:
		return c.prepared(ctx, c.bigBody(), true)
	}
	end := "COMMIT"
	if c.rng.IntN(12) == 0 {
		end = "ROLLBACK"
	}
	sql := "BEGIN;\n" + strings.Join(body, ";\n") + ";\n" + end
	if _, err := c.conn.Exec(ctx, sql); err != nil {
		return err
	}
	if end == "ROLLBACK" {
		c.w.rolledBack.Add(1)
	} else if big {
		c.w.big.Add(1)
	} else {
		c.w.small.Add(1)
	}
	return nil
}

// prepared prepares body under a new GID, waits a moment (so that the
// PREPARE is often decoded and applied alone) and commits or rolls it back.
func (c *tortureClient) prepared(ctx context.Context, body []string, big bool) error {
	c.gids++
	gid := fmt.Sprintf("torture_c%d_%d", c.id, c.gids)
	c.pending = &pendingOutcome{gid: gid, commit: c.rng.IntN(4) != 0}
	sql := "BEGIN;\n" + strings.Join(body, ";\n") + ";\nPREPARE TRANSACTION '" + gid + "'"
	if _, err := c.conn.Exec(ctx, sql); err != nil {
		return err
	}
	c.w.prepared.Add(1)
	if big {
		c.w.big.Add(1)
	}
	time.Sleep(time.Duration(c.rng.IntN(50)) * time.Millisecond)
	return c.finish(ctx)
}

func (c *tortureClient) table() string { return c.w.tables[c.rng.IntN(len(c.w.tables))] }

// nextIDs reserves n ids of the client's own range.
func (c *tortureClient) nextIDs(n int) int64 {
	first := int64(c.id)*1_000_000_000_000 + c.seq
	c.seq += int64(n)
	return first
}

func (c *tortureClient) remember(table string, id int64) {
	c.recent = append(c.recent, rowRef{table, id})
	if len(c.recent) > 400 {
		c.recent = c.recent[200:]
	}
}

// smallBody is one to five statements: inserts (some with a value large
// enough to be TOASTed, so that updates leaving it alone send it as
// unchanged), updates and deletes of the client's recent rows.
func (c *tortureClient) smallBody() []string {
	var out []string
	for range 1 + c.rng.IntN(5) {
		switch r := c.rng.IntN(10); {
		case r < 5 || len(c.recent) == 0:
			tbl := c.table()
			rows := 1 + c.rng.IntN(3)
			first := c.nextIDs(rows)
			vals := make([]string, rows)
			for i := range rows {
				id := first + int64(i)
				v := fmt.Sprintf("'c%d s%d'", c.id, id)
				if c.rng.IntN(10) == 0 {
					v = "(SELECT string_agg(md5(random()::text), '') FROM generate_series(1, 80))" // ~2.5kB: TOASTed
				}
				vals[i] = fmt.Sprintf("(%d, %d, %s, 0)", id, c.id, v)
				c.remember(tbl, id)
			}
			out = append(out, fmt.Sprintf("INSERT INTO %s (id, client, v, n) VALUES %s", tbl, strings.Join(vals, ", ")))
		case r < 9:
			ref := c.recent[c.rng.IntN(len(c.recent))]
			if c.rng.IntN(2) == 0 {
				out = append(out, fmt.Sprintf("UPDATE %s SET n = n + 1 WHERE id = %d", ref.table, ref.id)) // v unchanged
			} else {
				out = append(out, fmt.Sprintf("UPDATE %s SET n = n + 1, v = 'u' || n WHERE id = %d", ref.table, ref.id))
			}
		default:
			ref := c.recent[c.rng.IntN(len(c.recent))]
			out = append(out, fmt.Sprintf("DELETE FROM %s WHERE id = %d", ref.table, ref.id))
		}
	}
	return out
}

// bigBody inserts 500 to 1,500 rows of about 100 bytes (well past 64kB of
// decoded changes: streamed), sometimes with a savepoint whose changes are
// rolled back (a subtransaction abort inside the stream), then updates and
// deletes some of them.
func (c *tortureClient) bigBody() []string {
	tbl := c.table()
	n := 500 + c.rng.IntN(1000)
	first := c.nextIDs(n)
	last := first + int64(n) - 1
	out := []string{fmt.Sprintf("INSERT INTO %s (id, client, v, n) SELECT g, %d, repeat(md5(g::text), 3), 0 FROM generate_series(%d, %d) g",
		tbl, c.id, first, last)}
	if c.rng.IntN(3) == 0 {
		other := c.table()
		m := 200 + c.rng.IntN(500)
		sfirst := c.nextIDs(m)
		out = append(out, "SAVEPOINT s",
			fmt.Sprintf("INSERT INTO %s (id, client, v, n) SELECT g, %d, 'gone ' || g, 0 FROM generate_series(%d, %d) g", other, c.id, sfirst, sfirst+int64(m)-1),
			"ROLLBACK TO SAVEPOINT s")
		c.w.savepoints.Add(1)
	}
	if c.rng.IntN(2) == 0 {
		out = append(out, fmt.Sprintf("UPDATE %s SET n = n + 1, v = 'big update' WHERE id BETWEEN %d AND %d", tbl, first, first+int64(n/4)))
	}
	if c.rng.IntN(2) == 0 {
		out = append(out, fmt.Sprintf("DELETE FROM %s WHERE id BETWEEN %d AND %d", tbl, last-int64(n/8), last))
	}
	for range 3 {
		c.remember(tbl, first+int64(c.rng.IntN(n)))
	}
	return out
}
