package schema

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/rs/zerolog"
)

// Connect opens a connection of its own to the target for running
// entries, and a function that closes it.
type Connect func(ctx context.Context) (conn Execer, close func(), err error)

// EntryError is a post-data entry that failed on the target; Err wraps the
// server's *pgconn.PgError when the server refused it.
type EntryError struct {
	Entry Entry
	Err   error
}

func (e *EntryError) Error() string {
	return fmt.Sprintf("--schema: creating %s %s.%s from pg_dump's post-data: %v", strings.ToLower(e.Entry.Kind), e.Entry.Schema, e.Entry.Name, e.Err)
}

func (e *EntryError) Unwrap() error { return e.Err }

// BuildPostData runs a post-data section's entries (Parse) on the target.
//
// The index builds (Entry.IsBuild) run workers at a time on connections of
// their own (connect), each in its own transaction; the rest follows on
// one connection, in pg_dump's order, so that a foreign key finds the key
// it references. Every connection runs the preamble first (RunPreamble).
// An entry whose object exists already (from an attempt that crashed after
// it committed) is logged and left alone. The first failure stops the
// others; the error returned is that failure (an *EntryError when an entry
// failed), not the cancellation it caused.
func BuildPostData(ctx context.Context, preamble string, entries []Entry, workers int, connect Connect, log zerolog.Logger) error {
	var builds, rest []Entry
	for _, e := range entries {
		if e.IsBuild() {
			builds = append(builds, e)
		} else {
			rest = append(rest, e)
		}
	}
	log.Info().Int("index_builds", len(builds)).Int("others", len(rest)).Int("workers", workers).
		Msg("schema: building the post-data section on the target")
	jobs := make(chan Entry)
	errs := make(chan error, workers)
	ctx2, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for range min(workers, max(1, len(builds))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- runOn(ctx2, connect, preamble, jobs, cancel, log)
		}()
	}
feed:
	for _, e := range builds {
		select {
		case jobs <- e:
		case <-ctx2.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	close(errs)
	// The error that stopped the others, rather than their cancellation.
	var first error
	for err := range errs {
		if err != nil && (first == nil || errors.Is(first, context.Canceled)) {
			first = err
		}
	}
	if first != nil {
		return first
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	ordered := make(chan Entry, len(rest))
	for _, e := range rest {
		ordered <- e
	}
	close(ordered)
	return runOn(ctx, connect, preamble, ordered, cancel, log)
}

// runOn runs entries on a connection of its own; on an error it cancels
// the others.
func runOn(ctx context.Context, connect Connect, preamble string, entries <-chan Entry, cancel func(), log zerolog.Logger) error {
	conn, closeConn, err := connect(ctx)
	if err != nil {
		cancel()
		return err
	}
	defer closeConn()
	if err := RunPreamble(ctx, conn, preamble); err != nil {
		cancel()
		return err
	}
	if err := runEntries(ctx, conn, entries, log); err != nil {
		cancel()
		return err
	}
	return nil
}

// runEntries runs entries on conn, each in its own transaction, until
// entries is closed or one fails (an *EntryError); one whose object exists
// already is left alone.
func runEntries(ctx context.Context, conn Execer, entries <-chan Entry, log zerolog.Logger) error {
	for e := range entries {
		if err := runEntry(ctx, conn, e, log); err != nil {
			return err
		}
	}
	return nil
}

// runEntry runs one entry on conn in a transaction of its own; one whose
// object exists already is left alone.
func runEntry(ctx context.Context, conn Execer, e Entry, log zerolog.Logger) error {
	_, err := conn.Exec(ctx, e.SQL)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "42P07" || pe.Code == "42710" || pe.Code == "42P16") {
		log.Info().Str("object", e.Schema+"."+e.Name).Str("type", e.Kind).Msg("schema: already on the target, left alone")
		return nil
	}
	if err != nil {
		return &EntryError{Entry: e, Err: err}
	}
	return nil
}
