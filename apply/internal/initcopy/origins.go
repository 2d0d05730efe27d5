package initcopy

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/state"
)

// dropLeftCopyOrigins drops, after a failed copy, the workers' origins
// that they could not drop themselves: the failure closed the connection
// of a worker interrupted in mid-table, and its origin stays set up until
// the server has ended that connection's backend, a moment later.
func (c *Copier) dropLeftCopyOrigins(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), copyOriginReleaseWait)
	defer cancel()
	for {
		err := DropOrigins(ctx, c.Control, c.Applier)
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "55006" { // 55006: in use
			if err != nil {
				c.Log.Debug().Err(err).Msg("dropping the copy workers' replication origins after a failed copy; they are dropped when the copy finishes")
			}
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// copyOriginReleaseWait bounds how long a failed copy waits for its
// workers' origins to be released.
const copyOriginReleaseWait = 5 * time.Second

// dropOrigin drops the worker's origin when it ends, also after a failure:
// an origin that was set up holds one of the target's replication state
// slots until it is dropped, and the copy does not need it once its
// tables are committed. It is released first, on the session, rather than
// by the connection's end, which the server handles after Close returns.
// What cannot be dropped here (a lost connection), finish drops, or
// `walapply drop`.
func (w *copyWorker) dropOrigin(ctx context.Context, origin string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := state.SessionReset(ctx, w.tgt)
	if err == nil {
		err = state.DropOrigin(ctx, w.tgt, origin)
	}
	if err != nil {
		w.c.Log.Debug().Err(err).Str("origin", origin).Msg("dropping the copy worker's replication origin; the copy drops it once the worker has let go of it")
	}
}

// OriginName names the replication origin of copy worker id (from 1):
// "walapply_copy<id>_<applier>" (WorkerOriginName).
func OriginName(applier string, id int) string {
	return WorkerOriginName(OriginPrefix, applier, id)
}

// WorkerOriginName names the replication origin of a worker of applier:
// prefix, the worker's id (from 1), "_" and the applier's name, cut and
// completed with a hash of that name when it would pass the 63 bytes
// origin names are held to. Copy workers and parallel streaming workers
// name theirs this way, with their own prefixes.
func WorkerOriginName(prefix, applier string, id int) string {
	name := prefix + strconv.Itoa(id) + "_" + applier
	if len(name) <= state.MaxOriginNameLen {
		return name
	}
	h := fnv.New32a()
	h.Write([]byte(applier))
	suffix := fmt.Sprintf("_%08x", h.Sum32())
	cut := name[:state.MaxOriginNameLen-len(suffix)]
	for !utf8.ValidString(cut) { // do not split a character
		cut = cut[:len(cut)-1]
	}
	return cut + suffix
}

// OriginPrefix starts every copy worker's origin name.
const OriginPrefix = "walapply_copy"

// IsOriginOf reports whether origin is the origin of one of applier's
// copy workers: OriginName(applier, id) for some id.
func IsOriginOf(applier, origin string) bool {
	return IsWorkerOriginOf(OriginPrefix, applier, origin)
}

// IsWorkerOriginOf reports whether origin is WorkerOriginName(prefix,
// applier, id) for some id: the prefix, a worker id in its canonical
// form, and the name WorkerOriginName gives that id (so that another
// applier's worker, whose name only starts the same, is not taken).
func IsWorkerOriginOf(prefix, applier, origin string) bool {
	rest, ok := strings.CutPrefix(origin, prefix)
	digits, _, ok2 := strings.Cut(rest, "_")
	if !ok || !ok2 {
		return false
	}
	id, err := strconv.Atoi(digits)
	return err == nil && id >= 1 && strconv.Itoa(id) == digits && WorkerOriginName(prefix, applier, id) == origin
}

// OriginsOf lists the origins of applier's copy workers on the target,
// of however many workers any attempt ran.
func OriginsOf(ctx context.Context, q state.Querier, applier string) ([]string, error) {
	var all []string
	err := q.QueryRow(ctx, `SELECT coalesce(pg_catalog.array_agg(roname ORDER BY roname), '{}') FROM pg_catalog.pg_replication_origin
		WHERE pg_catalog.starts_with(roname, $1)`, OriginPrefix).Scan(&all)
	if err != nil {
		return nil, fmt.Errorf("listing the replication origins of the copy workers: %w", err)
	}
	var names []string
	for _, n := range all {
		if IsOriginOf(applier, n) {
			names = append(names, n)
		}
	}
	return names, nil
}

// DropOrigins drops the copy workers' origins once every table is
// copied: each worker drops its own when it ends, and this drops those
// that a worker could not (its connection was lost, or an earlier attempt
// was killed).
func DropOrigins(ctx context.Context, q state.Querier, applier string) error {
	names, err := OriginsOf(ctx, q, applier)
	if err != nil || len(names) == 0 {
		return err
	}
	_, err = q.Exec(ctx, `SELECT pg_catalog.pg_replication_origin_drop(roname)
		FROM pg_catalog.pg_replication_origin WHERE roname = ANY ($1)`, names)
	if err != nil {
		return fmt.Errorf("dropping the replication origins of the copy workers: %w", err)
	}
	return nil
}
