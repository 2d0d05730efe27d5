package migrations

import (
	"context"
	"fmt"
	"io/fs"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walapply/walapply/testenv"
)

func TestLatest(t *testing.T) {
	latest, err := Latest()
	if err != nil {
		t.Fatal(err)
	}
	files, err := fs.Glob(embedded, "sql/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if latest != int64(len(files)) {
		t.Fatalf("Latest() = %d, want %d (the embedded files are numbered 00001 on)", latest, len(files))
	}
}

func TestUp(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		c := testenv.NewCluster(t, testenv.Options{Version: version})
		ctx := context.Background()
		conn, err := c.Connect(ctx, "postgres")
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		// The target's own application already uses goose, with goose's
		// default table in public: walapply must not touch it.
		if _, err := conn.Exec(ctx, `CREATE TABLE public.goose_db_version (id int, version_id bigint, is_applied bool, tstamp timestamp);
			INSERT INTO public.goose_db_version VALUES (1, 42, true, now())`); err != nil {
			t.Fatal(err)
		}
		dsn := c.ConnString("postgres")

		// Version changes nothing in a database never migrated.
		current, latest, err := Version(ctx, dsn)
		if err != nil || current != 0 || latest != latestVersion(t) || latest < 3 {
			t.Fatalf("Version() before Up = %d, %d, %v; want 0, %d, nil", current, latest, err, latestVersion(t))
		}
		var schemaExists bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'walapply')").Scan(&schemaExists); err != nil || schemaExists {
			t.Fatalf("schema walapply exists after Version: %v, %v", schemaExists, err)
		}

		for i := 0; i < 2; i++ {
			if err := Up(ctx, dsn); err != nil {
				t.Fatalf("Up #%d: %v", i+1, err)
			}
			current, latest, err := Version(ctx, dsn)
			if err != nil || current != latest || latest != latestVersion(t) {
				t.Fatalf("Version() after Up #%d = %d, %d, %v; want %d, %[5]d, nil", i+1, current, latest, err, latestVersion(t))
			}
		}
		checkSchema(t, conn)

		var theirs int64
		if err := conn.QueryRow(ctx, "SELECT max(version_id) FROM public.goose_db_version").Scan(&theirs); err != nil || theirs != 42 {
			t.Fatalf("the application's goose table changed: max version %d, %v", theirs, err)
		}
		var applied []int64
		rows, err := conn.Query(ctx, "SELECT version_id FROM walapply.goose_db_version WHERE is_applied ORDER BY id")
		if err != nil {
			t.Fatal(err)
		}
		if applied, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
			t.Fatal(err)
		}
		want := []int64{0}
		for v := int64(1); v <= latestVersion(t); v++ {
			want = append(want, v)
		}
		if fmt.Sprint(applied) != fmt.Sprint(want) {
			t.Fatalf("walapply.goose_db_version has versions %v, want %v (goose's zero row, then each migration once)", applied, want)
		}
	})
}

// checkSchema checks walapply.appliers as the first migration defines it,
// by inserting a row and reading it back.
func checkSchema(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	if _, err := conn.Exec(ctx, `INSERT INTO walapply.appliers
		(name, slot_name, publications, origin_name, source_system_id, source_timeline)
		VALUES ('a1', 'slot_a1', '{pub1,"pub 2"}', 'walapply_a1', '7312345678901234567', 1)`); err != nil {
		t.Fatal(err)
	}
	var (
		pubs      []string
		timeline  int32
		createdOK bool
		updated   *string
	)
	err := conn.QueryRow(ctx, `SELECT publications, source_timeline, created_at > now() - interval '1 hour', updated_at::text
		FROM walapply.appliers WHERE name = 'a1'`).Scan(&pubs, &timeline, &createdOK, &updated)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(pubs) != "[pub1 pub 2]" || timeline != 1 || !createdOK || updated != nil {
		t.Fatalf("row read back: %q, %d, %v, %v", pubs, timeline, createdOK, updated)
	}
	// Required columns are required, and the origin is one applier's.
	for _, bad := range []string{
		`INSERT INTO walapply.appliers (name, slot_name, publications, origin_name, source_system_id) VALUES ('a2', 's', '{}', 'o2', 'x')`,
		`INSERT INTO walapply.appliers (name, slot_name, publications, origin_name, source_system_id, source_timeline) VALUES ('a1', 's', '{}', 'o3', 'x', 1)`,
		`INSERT INTO walapply.appliers (name, slot_name, publications, origin_name, source_system_id, source_timeline) VALUES ('a3', 's', '{}', 'walapply_a1', 'x', 1)`,
	} {
		if _, err := conn.Exec(ctx, bad); err == nil {
			t.Fatalf("accepted: %s", bad)
		}
	}
}

// TestUpConcurrent runs Up from several independent connection pools at
// once, as appliers starting together in separate processes would, against
// a database where the schema does not exist yet.
func TestUpConcurrent(t *testing.T) {
	c := testenv.NewCluster(t, testenv.Options{})
	ctx := context.Background()
	dsn := c.ConnString("postgres")
	const n = 4
	// Hold the migration lock so that every Up queues behind it, then let
	// them all go at once.
	holder, err := c.Connect(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock($1)", LockID); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range errs {
		wg.Go(func() { errs[i] = Up(ctx, dsn) })
	}
	for {
		var waiting int
		if err := holder.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted").Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting == n {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_unlock($1)", LockID); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Up #%d: %v", i, err)
		}
	}
	conn, err := c.Connect(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var rows int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM walapply.goose_db_version WHERE version_id = 1").Scan(&rows); err != nil || rows != 1 {
		t.Fatalf("version 1 recorded %d times, %v; want once", rows, err)
	}
	checkSchema(t, conn)
}

// TestUpWithoutCreatePrivilege: once the schema exists (created by an
// administrator), a role that may not create schemas in the database can
// still run Up, provided it owns the schema.
func TestUpWithoutCreatePrivilege(t *testing.T) {
	c := testenv.NewCluster(t, testenv.Options{})
	ctx := context.Background()
	for _, q := range []string{
		"CREATE ROLE applier LOGIN",
		"REVOKE CREATE ON DATABASE postgres FROM PUBLIC",
		"CREATE SCHEMA walapply AUTHORIZATION applier",
	} {
		if err := c.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := pgx.ParseConfig(c.ConnString("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	dsn := fmt.Sprintf("postgres://applier@%s:%d/postgres?sslmode=disable", cfg.Host, cfg.Port)
	if err := Up(ctx, dsn); err != nil {
		t.Fatalf("Up as a role without CREATE on the database: %v", err)
	}
	current, _, err := Version(ctx, dsn)
	if err != nil || current != latestVersion(t) {
		t.Fatalf("Version() = %d, %v; want %d", current, err, latestVersion(t))
	}
}

// latestVersion is the newest migration's version.
func latestVersion(t *testing.T) int64 {
	t.Helper()
	v, err := Latest()
	if err != nil {
		t.Fatal(err)
	}
	return v
}
