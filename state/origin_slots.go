package state

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// NoOriginSlotError is the error of SessionSetup and AdvanceOrigin when the
// target has no free replication state slot for the origin. Retrying does
// not help: a slot frees up only when an origin is dropped, and the limit
// changes only with a restart of the target.
//
// Replication state slots. An origin's progress lives in shared memory, in
// one of a fixed number of replication state slots: max_replication_slots
// of them, and from PostgreSQL 18 on max_active_replication_origins. An
// origin takes a slot the first time a session sets it up or it is
// advanced, and keeps it, with or without progress, until it is dropped
// (checked on PostgreSQL 15 and 18). When none is free, the server fails
// with SQLSTATE 53400 and a message that names neither the setting nor
// walapply's part in it; NoOriginSlotError says both.
type NoOriginSlotError struct {
	Origin string
	// Setting is the target's limit on replication state slots and Limit
	// its value (0 if it could not be read).
	Setting string
	Limit   int
	// Taken names the origins that hold the slots (at most a few).
	Taken []string
	Err   error // the server's error
}

// originSlotsShown bounds the origins a NoOriginSlotError names.
const originSlotsShown = 10

func (e *NoOriginSlotError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "no free replication state slot on the target for replication origin %q", e.Origin)
	if e.Limit > 0 {
		fmt.Fprintf(&b, ": all %d (%s) are taken", e.Limit, e.Setting)
	}
	if len(e.Taken) > 0 {
		fmt.Fprintf(&b, ", by %s", strings.Join(e.Taken, ", "))
	}
	fmt.Fprintf(&b, "; each walapply applier needs one for its origin, and each copy worker one more during an initial copy: "+
		"raise %s on the target (a restart is needed), or free slots by dropping appliers no longer used (walapply drop) "+
		"or other replication origins (SELECT pg_replication_origin_drop(name))", e.Setting)
	return b.String()
}

func (e *NoOriginSlotError) Unwrap() error { return e.Err }

// noOriginSlot turns a server error about a full replication state slot
// array into a NoOriginSlotError, reading the limit and the origins that
// hold the slots on q; it returns other errors as they are.
func noOriginSlot(ctx context.Context, q Querier, origin string, err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "53400" {
		return err
	}
	e := &NoOriginSlotError{Origin: origin, Setting: "max_replication_slots (on PostgreSQL 18 and later: max_active_replication_origins)", Err: err}
	// The session is usable: the failed statement ran outside a
	// transaction block (or the caller's transaction is lost anyway).
	var version int
	if q.QueryRow(ctx, "SELECT pg_catalog.current_setting('server_version_num')::int").Scan(&version) != nil {
		return e
	}
	e.Setting = "max_replication_slots"
	if version >= 180000 {
		e.Setting = "max_active_replication_origins"
	}
	_ = q.QueryRow(ctx, "SELECT pg_catalog.current_setting($1)::int", e.Setting).Scan(&e.Limit)
	var taken []string
	var more int
	if q.QueryRow(ctx, `SELECT coalesce((pg_catalog.array_agg(external_id ORDER BY external_id))[1:$1], '{}'), greatest(count(*) - $1, 0)::int
		FROM pg_catalog.pg_replication_origin_status`, originSlotsShown).Scan(&taken, &more) == nil {
		e.Taken = taken
		if more > 0 {
			e.Taken = append(e.Taken, fmt.Sprintf("and %d more", more))
		}
	}
	return e
}
