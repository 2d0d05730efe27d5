// Package migrations keeps walapply's own schema on the target database, the
// schema walapply, up to date. The migrations are SQL files embedded in the
// binary (sql/NNNNN_name.sql) in goose's format
// (github.com/pressly/goose/v3), versioned in goose's table. Every start of
// walapply migrates, so UpConn (direct.go) does it in few round trips: one
// query on a target already at the latest version, and otherwise every
// pending migration in one transaction, as goose would record it; goose
// itself runs what that path leaves to it (UpDB).
//
// # Where goose keeps its version
//
// goose records applied versions in a table. Its default, goose_db_version
// in the connection's search_path, would put walapply's bookkeeping into the
// target's public schema, where the replicated tables live and where the
// target's own application may already use goose with that very table name.
// So the version table is walapply.goose_db_version (VersionTable), next to
// the tables it versions. goose creates the table but not its schema, so Up
// creates the schema first, under the same advisory lock.
//
// # Concurrency
//
// Up may run in several processes at once against one database (appliers
// starting together). Both paths hold LockID, walapply's own advisory lock
// key (so that the target's own goose migrations do not wait for
// walapply's or the other way round): UpConn as a transaction-level lock
// around its one transaction, UpDB (goose's Postgres session locker) as a
// session-level lock around the whole run, retrying every second for up to
// five minutes. The two forms conflict with each other, so a second process
// waits for the first whichever path either takes, and then finds nothing
// left to do. UpDB creates the schema in a transaction holding the same key
// as a transaction-level lock.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"github.com/walapply/walapply/internal/secret"
)

//go:embed sql/*.sql
var embedded embed.FS

// Schema is the target-side schema that holds walapply's tables.
const Schema = "walapply"

// VersionTable is goose's version table, schema-qualified.
const VersionTable = Schema + ".goose_db_version"

// LockID is the advisory lock key that serializes migrations of the walapply
// schema: the bytes of "walapply" read as a big-endian integer.
const LockID int64 = 0x77616c6170706c79

// lockRetries is how many one-second retries a second migrating process makes
// while the first holds the lock.
const lockRetries = 300

// files returns the migration files at the root of an fs.FS, as goose wants
// them.
func files() fs.FS {
	sub, err := fs.Sub(embedded, "sql")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	return sub
}

// Open opens a database/sql handle on connString through pgx. Its errors,
// and those of Up and Version, show no piece of a password (package secret).
func Open(connString string) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("migrations: parsing the connection string: %w", secret.Error(err, connString))
	}
	return stdlib.OpenDB(*cfg), nil
}

// Up connects to the target database at connString and applies every
// migration not yet applied. It is idempotent and safe to run concurrently.
func Up(ctx context.Context, connString string) error {
	cfg, err := pgx.ParseConfig(connString)
	if err != nil {
		return fmt.Errorf("migrations: parsing the connection string: %w", secret.Error(err, connString))
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("migrations: connecting: %w", secret.Error(err, connString))
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return secret.Error(UpConn(ctx, conn), connString)
}

// UpDB is Up on an open database handle, run by goose alone (UpConn runs
// it where its direct path does not apply). The handle must allow at least
// two connections (goose holds one for the lock).
func UpDB(ctx context.Context, db *sql.DB) error {
	if err := ensureSchema(ctx, db); err != nil {
		return err
	}
	p, err := newProvider(db)
	if err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrations: migrating schema %s: %w", Schema, err)
	}
	return nil
}

// Version connects to the target database at connString and returns the
// version of the walapply schema there (0 if it was never migrated) and the
// latest version this build knows. It changes nothing in the database.
func Version(ctx context.Context, connString string) (current, latest int64, err error) {
	db, err := Open(connString)
	if err != nil {
		return 0, 0, err
	}
	defer db.Close()
	current, latest, err = VersionDB(ctx, db)
	return current, latest, secret.Error(err, connString)
}

// VersionDB is Version on an open database handle.
func VersionDB(ctx context.Context, db *sql.DB) (current, latest int64, err error) {
	latest, err = Latest()
	if err != nil {
		return 0, 0, err
	}
	// goose creates its version table when asked for the version; look
	// first, so that asking changes nothing.
	var exists bool
	if err := db.QueryRowContext(ctx, "SELECT pg_catalog.to_regclass($1) IS NOT NULL", VersionTable).Scan(&exists); err != nil {
		return 0, 0, fmt.Errorf("migrations: looking for %s: %w", VersionTable, err)
	}
	if !exists {
		return 0, latest, nil
	}
	p, err := newProvider(db)
	if err != nil {
		return 0, 0, err
	}
	current, err = p.GetDBVersion(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("migrations: reading the version of schema %s: %w", Schema, err)
	}
	return current, latest, nil
}

// Latest returns the highest migration version embedded in this build.
func Latest() (int64, error) {
	names, err := fs.Glob(files(), "*.sql")
	if err != nil {
		return 0, fmt.Errorf("migrations: listing the embedded migrations: %w", err)
	}
	var latest int64
	for _, name := range names {
		v, err := goose.NumericComponent(name)
		if err != nil {
			return 0, fmt.Errorf("migrations: embedded migration %s: %w", name, err)
		}
		latest = max(latest, v)
	}
	return latest, nil
}

func newProvider(db *sql.DB) (*goose.Provider, error) {
	locker, err := lock.NewPostgresSessionLocker(
		lock.WithLockID(LockID),
		lock.WithLockTimeout(1, lockRetries),
		lock.WithUnlockTimeout(1, 60),
	)
	if err != nil {
		return nil, fmt.Errorf("migrations: creating the migration lock: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, files(),
		goose.WithTableName(VersionTable),
		goose.WithSessionLocker(locker),
		// Go migrations registered globally by other packages of the
		// program are not walapply's.
		goose.WithDisableGlobalRegistry(true),
	)
	if err != nil {
		return nil, fmt.Errorf("migrations: reading the embedded migrations: %w", err)
	}
	return p, nil
}

// ensureSchema creates the walapply schema if it is missing. The check runs
// first without the lock and without needing CREATE on the database, so a
// role that may not create schemas can still run Up once the schema exists.
func ensureSchema(ctx context.Context, db *sql.DB) error {
	exists, err := schemaExists(ctx, db)
	if err != nil || exists {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrations: creating schema %s: %w", Schema, err)
	}
	defer tx.Rollback()
	// The same key as goose's session lock: wait for a migration running in
	// another process, and keep two processes from both creating the schema.
	if _, err := tx.ExecContext(ctx, "SELECT pg_catalog.pg_advisory_xact_lock($1)", LockID); err != nil {
		return fmt.Errorf("migrations: locking to create schema %s: %w", Schema, err)
	}
	if exists, err := schemaExists(ctx, tx); err != nil || exists {
		return err
	}
	if _, err := tx.ExecContext(ctx, "CREATE SCHEMA "+pgx.Identifier{Schema}.Sanitize()); err != nil {
		return fmt.Errorf("migrations: creating schema %s: %w", Schema, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrations: creating schema %s: %w", Schema, err)
	}
	return nil
}

type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func schemaExists(ctx context.Context, q queryer) (bool, error) {
	var exists bool
	err := q.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1)", Schema).Scan(&exists)
	if err != nil {
		return false, fmt.Errorf("migrations: looking for schema %s: %w", Schema, err)
	}
	return exists, nil
}
