package testenv_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walapply/walapply/testenv"
)

// testCtx bounds one test's database calls; it is a guard against hangs, not
// a performance assertion.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// queryString runs a query returning one text value in database postgres
// of c (queryAs on c's connection string).
func queryString(t *testing.T, c *testenv.Cluster, sql string) string {
	t.Helper()
	return queryAs(t, testCtx(t), c.ConnString("postgres"), sql)
}

func TestCluster(t *testing.T) {
	t.Parallel()
	testenv.SkipShort(t)
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		ctx := testCtx(t)
		begin := time.Now()
		c, err := testenv.Start(ctx, testenv.Options{
			Version:  version,
			Settings: map[string]string{"logical_decoding_work_mem": "64kB", "application_name": "it's testenv"},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("PostgreSQL %d cluster started in %v", version, time.Since(begin))
		defer func() {
			dir := c.DataDir()
			if err := c.Close(); err != nil {
				t.Error(err)
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("data directory still there after Close (stat: %v)", err)
			}
			if err := c.Start(ctx); !errors.Is(err, testenv.ErrClosed) {
				t.Errorf("Start after Close: %v, want ErrClosed", err)
			}
		}()

		if got := c.Version(); got != version {
			t.Errorf("Version() = %d, want %d", got, version)
		}
		num, err := strconv.Atoi(queryString(t, c, "SHOW server_version_num"))
		if err != nil || num/10000 != version {
			t.Errorf("server_version_num = %d (%v), want major %d", num, err, version)
		}
		for setting, want := range map[string]string{
			"wal_level":                 "logical",
			"logical_decoding_work_mem": "64kB",
			"application_name":          "it's testenv",
			"max_prepared_transactions": "20",
			"max_replication_slots":     "20",
			"fsync":                     "off",
			"listen_addresses":          "127.0.0.1",
			"port":                      strconv.Itoa(c.Port()),
		} {
			if got := queryString(t, c, "SHOW "+setting); got != want {
				t.Errorf("SHOW %s = %q, want %q", setting, got, want)
			}
		}
		if !strings.Contains(c.ConnString("postgres"), "127.0.0.1:"+strconv.Itoa(c.Port())) {
			t.Errorf("ConnString %q does not name port %d", c.ConnString("postgres"), c.Port())
		}

		if err := c.Exec(ctx, "CREATE TABLE kept (id int PRIMARY KEY, note text)"); err != nil {
			t.Fatal(err)
		}
		if err := c.Exec(ctx, "INSERT INTO kept VALUES ($1, $2)", 1, "committed before the crash"); err != nil {
			t.Fatal(err)
		}
		port := c.Port()
		if err := c.StopImmediate(ctx); err != nil {
			t.Fatal(err)
		}
		if err := c.StopImmediate(ctx); !errors.Is(err, testenv.ErrNotRunning) {
			t.Errorf("second StopImmediate: %v, want ErrNotRunning", err)
		}
		if err := c.Exec(ctx, "SELECT 1"); err == nil {
			t.Error("the server still answers after StopImmediate")
		}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if err := c.Start(ctx); !errors.Is(err, testenv.ErrRunning) {
			t.Errorf("second Start: %v, want ErrRunning", err)
		}
		if c.Port() != port {
			t.Errorf("port changed from %d to %d across a restart", port, c.Port())
		}
		if got := queryString(t, c, "SELECT note FROM kept WHERE id = 1"); got != "committed before the crash" {
			t.Errorf("after crash recovery: note = %q", got)
		}
		log, err := c.Log()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(log, "database system was not properly shut down") {
			t.Errorf("the log shows no crash recovery after StopImmediate:\n%s", log)
		}

		if err := c.Exec(ctx, "INSERT INTO kept VALUES (2, 'before a clean restart')"); err != nil {
			t.Fatal(err)
		}
		if err := c.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		if got := queryString(t, c, "SELECT count(*)::text FROM kept"); got != "2" {
			t.Errorf("after Restart: %s rows, want 2", got)
		}
	})
}

func TestReplicationConnection(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := testenv.NewCluster(t, testenv.Options{})
	conn, err := pgconn.Connect(ctx, c.ReplicationConnString("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	sys, err := pglogrepl.IdentifySystem(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	if sys.DBName != "postgres" {
		t.Errorf("IDENTIFY_SYSTEM dbname = %q, want postgres", sys.DBName)
	}
	slot, err := pglogrepl.CreateReplicationSlot(ctx, conn, "testenv_slot", "pgoutput", pglogrepl.CreateReplicationSlotOptions{Temporary: true})
	if err != nil {
		t.Fatal(err)
	}
	if slot.SlotName != "testenv_slot" {
		t.Errorf("created slot %q", slot.SlotName)
	}
}

func TestPair(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		ctx := testCtx(t)
		p := testenv.NewPair(t, testenv.PairOptions{
			Version:        version,
			SourceSettings: map[string]string{"work_mem": "8MB"},
			TargetSettings: map[string]string{"work_mem": "16MB"},
		})
		if p.Source.Port() == p.Target.Port() || p.Source.DataDir() == p.Target.DataDir() {
			t.Fatalf("source and target share port %d or data directory %s", p.Source.Port(), p.Source.DataDir())
		}
		for _, c := range []*testenv.Cluster{p.Source, p.Target} {
			if c.Version() != version {
				t.Errorf("cluster version %d, want %d", c.Version(), version)
			}
		}
		if got := queryString(t, p.Source, "SHOW work_mem"); got != "8MB" {
			t.Errorf("source work_mem = %s, want 8MB", got)
		}
		if got := queryString(t, p.Target, "SHOW work_mem"); got != "16MB" {
			t.Errorf("target work_mem = %s, want 16MB", got)
		}
		if err := p.Source.Exec(ctx, "CREATE TABLE only_on_source (id int)"); err != nil {
			t.Fatal(err)
		}
		if got := queryString(t, p.Target, "SELECT coalesce(to_regclass('only_on_source')::text, 'absent')"); got != "absent" {
			t.Errorf("a table created on the source exists on the target: %s", got)
		}
	})
}

func TestHBA(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := testenv.NewCluster(t, testenv.Options{HBA: []string{"host all alice 127.0.0.1/32 reject"}})
	if err := c.Exec(ctx, "CREATE ROLE alice LOGIN; CREATE ROLE bob LOGIN"); err != nil {
		t.Fatal(err)
	}
	for user, wantOK := range map[string]bool{"alice": false, "bob": true} {
		conn, err := pgx.Connect(ctx, strings.Replace(c.ConnString("postgres"), "postgres@", user+"@", 1))
		if err == nil {
			conn.Close(ctx)
		}
		if (err == nil) != wantOK {
			t.Errorf("connecting as %s: %v, want success %v", user, err, wantOK)
		}
		if !wantOK && err != nil && !strings.Contains(err.Error(), "pg_hba.conf rejects") {
			t.Errorf("connecting as %s failed for another reason: %v", user, err)
		}
	}
}

func TestCreateDatabase(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := testenv.NewCluster(t, testenv.Options{})
	const name = `we/ird "db" ü`
	if err := c.CreateDatabase(ctx, name); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, c.ConnString(name))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var got string
	if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != name {
		t.Errorf("connected to %q, want %q", got, name)
	}
}

func TestTool(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		psql, err := testenv.Tool(version, "psql")
		if err != nil {
			t.Fatal(err)
		}
		c := testenv.NewCluster(t, testenv.Options{Version: version})
		out, err := exec.Command(psql, "-X", "-A", "-t", "-c", "SELECT current_setting('server_version_num')::int / 10000", c.ConnString("postgres")).CombinedOutput()
		if err != nil {
			t.Fatalf("psql: %v\n%s", err, out)
		}
		if got := strings.TrimSpace(string(out)); got != strconv.Itoa(version) {
			t.Errorf("psql printed %q, want %d", got, version)
		}
	})
	if _, err := testenv.Tool(15, "../postgres"); err == nil {
		t.Error("Tool accepted a path")
	}
}

func TestBinDirUnsupported(t *testing.T) {
	if _, err := testenv.BinDir(9); !errors.Is(err, testenv.ErrUnsupportedVersion) {
		t.Errorf("BinDir(9) = %v, want ErrUnsupportedVersion", err)
	}
}
