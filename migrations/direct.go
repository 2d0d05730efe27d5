package migrations

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
)

// migration is one embedded migration file: its version and the SQL of its
// Up section.
type migration struct {
	version int64
	name    string
	up      string
}

// errNeedsGoose says that the direct path (UpConn) leaves a migration run to
// goose: a migration file it does not handle (NO TRANSACTION, ENVSUB), or a
// version table it does not read the way goose does (versions missing below
// the newest applied one, rows of down migrations).
var errNeedsGoose = errors.New("migrations: left to goose")

// embeddedMigrations reads the embedded files, in version order.
func embeddedMigrations() ([]migration, error) {
	names, err := fs.Glob(files(), "*.sql")
	if err != nil {
		return nil, fmt.Errorf("migrations: listing the embedded migrations: %w", err)
	}
	var out []migration
	for _, name := range names {
		v, err := goose.NumericComponent(name)
		if err != nil {
			return nil, fmt.Errorf("migrations: embedded migration %s: %w", name, err)
		}
		b, err := fs.ReadFile(files(), name)
		if err != nil {
			return nil, fmt.Errorf("migrations: reading embedded migration %s: %w", name, err)
		}
		up, ok := upSection(string(b))
		m := migration{version: v, name: name, up: up}
		if !ok {
			m.up = "" // goose handles it
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b migration) int { return int(a.version - b.version) })
	return out, nil
}

// upSection returns the text between "-- +goose Up" and "-- +goose Down"
// (or the end), and false when the file uses an annotation the direct path
// leaves to goose. The section runs as one simple-protocol query, which the
// server splits into statements itself, dollar quotes included, so
// StatementBegin/End (comments to the server) need no handling.
func upSection(text string) (string, bool) {
	var b strings.Builder
	in := false
	for _, line := range strings.SplitAfter(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "-- +goose ") {
			switch ann := strings.ToLower(strings.TrimSpace(strings.TrimPrefix(trimmed, "-- +goose "))); {
			case ann == "up":
				in = true
				continue
			case ann == "down":
				in = false
				continue
			case ann == "statementbegin" || ann == "statementend":
			default:
				return "", false // NO TRANSACTION, ENVSUB ON/OFF, ...
			}
		}
		if in {
			b.WriteString(line)
		}
	}
	return b.String(), true
}

// appliedSQL reads goose's version table, the way goose reads it.
const appliedSQL = `SELECT version_id, is_applied FROM ` + VersionTable + ` ORDER BY id`

// readApplied returns the versions goose recorded as applied, or
// errNeedsGoose when a row is a down migration's (is_applied false: the
// legacy goose records those, and reading them needs goose's order rules).
// missing is true when the schema or the table does not exist: the query
// is sent without looking first, which costs a target already set up
// nothing and a fresh one an error in its server log ("relation
// walapply.goose_db_version does not exist"), once in its life.
func readApplied(ctx context.Context, conn *pgx.Conn) (applied map[int64]bool, missing bool, err error) {
	rows, _ := conn.Query(ctx, appliedSQL, pgx.QueryExecModeSimpleProtocol)
	applied = map[int64]bool{}
	var v int64
	var ok bool
	_, err = pgx.ForEachRow(rows, []any{&v, &ok}, func() error {
		if !ok {
			return errNeedsGoose
		}
		applied[v] = true
		return nil
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "3F000") { // undefined_table, invalid_schema_name
		return nil, true, nil
	}
	if err != nil && !errors.Is(err, errNeedsGoose) {
		err = fmt.Errorf("migrations: reading %s: %w", VersionTable, err)
	}
	return applied, false, err
}

// pending returns the migrations not in applied, or errNeedsGoose when one
// of them is older than an applied one (goose refuses those unless told to
// allow them) or is a file the direct path does not run.
func pending(all []migration, applied map[int64]bool) ([]migration, error) {
	var newest int64
	for v := range applied {
		newest = max(newest, v)
	}
	var out []migration
	for _, m := range all {
		if applied[m.version] {
			continue
		}
		if m.version < newest || m.up == "" {
			return nil, errNeedsGoose
		}
		out = append(out, m)
	}
	return out, nil
}

// UpConn is Up on an open connection, in as few round trips as it can: a
// target already at the latest version costs one query (the version
// table's rows); one that is not gets every pending migration in one
// transaction of two more round trips, which takes the transaction-level
// form of LockID (it conflicts with goose's session-level form, so a
// process running goose on the same database waits for it and the other
// way round), creates the schema and goose's version table if they are
// missing, runs the migrations' Up sections and records each version in
// the version table as goose does, so goose (Version, an older walapply)
// reads the result as its own. Anything unusual (see errNeedsGoose) runs
// through goose, on a connection of its own opened from conn's
// configuration. conn is left outside any transaction.
func UpConn(ctx context.Context, conn *pgx.Conn) error {
	err := upDirect(ctx, conn)
	if !errors.Is(err, errNeedsGoose) {
		return err
	}
	db := stdlib.OpenDB(*conn.Config())
	defer db.Close()
	return UpDB(ctx, db)
}

// upDirect is UpConn without the goose fallback.
func upDirect(ctx context.Context, conn *pgx.Conn) error {
	all, err := embeddedMigrations()
	if err != nil {
		return err
	}
	applied, missing, err := readApplied(ctx, conn)
	if err != nil {
		return err
	}
	if todo, err := pending(all, applied); err != nil || (len(todo) == 0 && !missing) {
		return err
	}

	// Under the lock, look again: another process may have migrated.
	results, err := conn.PgConn().Exec(ctx, fmt.Sprintf(`BEGIN;
SELECT pg_catalog.pg_advisory_xact_lock(%d);
SELECT EXISTS (SELECT FROM pg_catalog.pg_namespace WHERE nspname = '%s'), pg_catalog.to_regclass('%s') IS NOT NULL`,
		LockID, Schema, VersionTable)).ReadAll()
	committed := false
	defer func() {
		if !committed && !conn.PgConn().IsClosed() {
			_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	if err != nil {
		return fmt.Errorf("migrations: locking to migrate schema %s: %w", Schema, err)
	}
	facts := results[len(results)-1].Rows
	if len(facts) != 1 || len(facts[0]) != 2 {
		return fmt.Errorf("migrations: looking for schema %s: unexpected answer", Schema)
	}
	schemaExists, tableExists := string(facts[0][0]) == "t", string(facts[0][1]) == "t"
	applied = map[int64]bool{}
	if tableExists {
		if applied, _, err = readApplied(ctx, conn); err != nil {
			return err
		}
	}
	todo, err := pending(all, applied)
	if err != nil {
		return err
	}
	if len(todo) == 0 {
		committed = true
		if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
			return fmt.Errorf("migrations: migrating schema %s: %w", Schema, err)
		}
		return nil
	}

	var b strings.Builder
	if !schemaExists {
		fmt.Fprintf(&b, "CREATE SCHEMA %s;\n", pgx.Identifier{Schema}.Sanitize())
	}
	if !tableExists {
		// goose's own table and its zero row (internal/dialects/postgres.go).
		fmt.Fprintf(&b, `CREATE TABLE %s (
		id integer PRIMARY KEY GENERATED BY DEFAULT AS IDENTITY,
		version_id bigint NOT NULL,
		is_applied boolean NOT NULL,
		tstamp timestamp NOT NULL DEFAULT now()
	);
INSERT INTO %[1]s (version_id, is_applied) VALUES (0, true);
`, VersionTable)
	}
	for _, m := range todo {
		b.WriteString(m.up)
		fmt.Fprintf(&b, ";\nINSERT INTO %s (version_id, is_applied) VALUES (%d, true);\n", VersionTable, m.version)
	}
	b.WriteString("COMMIT")
	if _, err := conn.PgConn().Exec(ctx, b.String()).ReadAll(); err != nil {
		return fmt.Errorf("migrations: migrating schema %s (versions %d to %d): %w", Schema, todo[0].version, todo[len(todo)-1].version, err)
	}
	committed = true
	return nil
}
