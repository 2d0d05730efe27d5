package apply

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// defaultIndexMemory is Config.IndexMemory's default.
//
// The post-data section's index builds sort every key of their table, in
// memory if maintenance_work_mem holds them, else on disk in runs merged
// afterwards. PostgreSQL's default of 64 MB holds about 1.5 million
// integer keys (a sorted index tuple and its slot take some 40 bytes),
// so the primary key of a table of 5 million rows, the last build of a
// migration and the one it waits for, was an external sort. 256 MiB holds
// about 6 million; with Config.IndexWorkers builds at a time (2 by
// default) the target lends up to that many times as much for the
// minutes of the post-data section, which a server taking a migration
// can spare; --index-memory sets it, or leaves the target's own setting.
const defaultIndexMemory = 256 << 20

// maxIndexMemoryKB is the largest maintenance_work_mem PostgreSQL takes,
// in kB (MAX_KILOBYTES on 64-bit builds).
const maxIndexMemoryKB = 1<<31 - 1

// raiseIndexMemory sets the session's maintenance_work_mem to want bytes
// (Config.IndexMemory: 0 for defaultIndexMemory, negative: nothing
// changed) unless the target's setting for the role is higher already.
// maintenance_work_mem is a user setting: no privilege is needed.
func raiseIndexMemory(ctx context.Context, conn *pgx.Conn, want int64) error {
	if want < 0 {
		return nil
	}
	if want == 0 {
		want = defaultIndexMemory
	}
	kb := min(want>>10, maxIndexMemoryKB)
	_, err := conn.Exec(ctx, `SELECT pg_catalog.set_config('maintenance_work_mem',
		greatest(pg_catalog.pg_size_bytes(pg_catalog.current_setting('maintenance_work_mem')) / 1024, $1::bigint)::text || 'kB', false)`, kb)
	if err != nil {
		return fmt.Errorf("setting maintenance_work_mem to %d kB for the index builds on the target: %w", kb, err)
	}
	return nil
}
