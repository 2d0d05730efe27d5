package apply_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/rs/zerolog"
	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/internal/secret/secrettest"
	"github.com/walapply/walapply/internal/testutil"
	"github.com/walapply/walapply/migrations"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/testenv"
)

// The awkward passwords of issue 16: TestPasswordsNeverPrinted's
// companion, with its helpers (secStart, deadPort), over every command and
// library entry point that takes a connection string.

// awkwardRole is the role the awkward passwords are tried for; its own
// password is none of them, so a connection that gets to the server fails
// authentication.
const awkwardRole = "walawk"

// awkwardPath is one way a connection attempt fails: the connection string
// does not parse, the server refuses the password, nothing listens.
type awkwardPath struct {
	name string
	port func(c *testenv.Cluster, dead int) string
}

var awkwardPaths = []awkwardPath{
	{"parse", func(*testenv.Cluster, int) string { return "notaport" }},
	{"auth", func(c *testenv.Cluster, _ int) string { return strconv.Itoa(c.Port()) }},
	{"refused", func(_ *testenv.Cluster, dead int) string { return strconv.Itoa(dead) }},
}

// awkwardCase is one connection string with an awkward password on one
// error path, and what the output must say besides not showing it.
type awkwardCase struct {
	password, form, path, conn string
	want                       []string // all of them, in the output
}

// awkwardCases returns, for every error path, every awkward password,
// each in the form rotate picks (all forms when rotate is -1).
func awkwardCases(t *testing.T, c *testenv.Cluster, dead int, rotate int) []awkwardCase {
	t.Helper()
	var out []awkwardCase
	for pi, p := range awkwardPaths {
		for i, pw := range secrettest.Passwords {
			for fi, f := range secrettest.Forms {
				if rotate >= 0 && fi != (i+pi+rotate)%len(secrettest.Forms) {
					continue
				}
				conn := f.Make("127.0.0.1", p.port(c, dead), awkwardRole, "postgres", pw)
				ac := awkwardCase{password: pw, form: f.Name, path: p.name, conn: conn}
				// What the error must still tell: the reason, and where
				// it connected to, when the string says so unambiguously.
				cfg, err := pgconn.ParseConfig(conn)
				switch {
				case err != nil:
					ac.want = []string{"cannot parse"}
				case cfg.Host != "127.0.0.1" || cfg.User != awkwardRole:
					// A raw '@' moved the split between password and
					// host: what the error says is pgconn's guess.
				case p.name == "auth":
					ac.want = []string{"28P01", `"` + awkwardRole + `"`}
				case p.name == "refused":
					ac.want = []string{"refused", fmt.Sprintf("127.0.0.1:%d", dead), "user=" + awkwardRole}
				}
				out = append(out, ac)
			}
		}
	}
	return out
}

// checkAwkward fails the test if text shows a piece of the case's password
// or lacks what it must say.
func checkAwkward(t *testing.T, what string, ac awkwardCase, text string) {
	t.Helper()
	if piece := secrettest.Leak(text, ac.password); piece != "" {
		t.Errorf("%s, password %q as %s, %s: the output shows %q: ...%s...", what, ac.password, ac.form, ac.path, piece, secrettest.Context(text, piece))
	}
	for _, w := range ac.want {
		// The binary's fatal error is a JSON record: quotes escaped.
		escaped, _ := json.Marshal(w)
		if !strings.Contains(text, w) && !strings.Contains(text, string(escaped[1:len(escaped)-1])) {
			t.Errorf("%s, password %q as %s, %s: the output lacks %q:\n%s", what, ac.password, ac.form, ac.path, w, text)
		}
	}
}

// awkwardCluster starts a cluster where awkwardRole needs a password and
// walapply's schema exists (status reads it before it connects to a
// source), with a publication and a slot for run and decode.
func awkwardCluster(t *testing.T, version int) *testenv.Cluster {
	t.Helper()
	c := testenv.NewCluster(t, testenv.Options{Version: version, HBA: []string{"host all " + awkwardRole + " 127.0.0.1/32 scram-sha-256"}})
	ctx := context.Background()
	for _, q := range []string{
		"CREATE ROLE " + awkwardRole + " LOGIN SUPERUSER PASSWORD 'none-of-the-awkward-ones'",
		"CREATE TABLE awk (id int PRIMARY KEY)",
		"CREATE PUBLICATION awk FOR TABLE awk",
		"SELECT pg_create_logical_replication_slot('awk', 'pgoutput')",
	} {
		if err := c.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := migrations.Up(ctx, c.ConnString("postgres")); err != nil {
		t.Fatal(err)
	}
	return c
}

// passwordCommands are walapply's commands, once per flag that takes a
// connection string: the arguments that make the command connect with
// conn on that flag, good working for every other one. A new command with
// a connection string is a new row.
var passwordCommands = []struct {
	name string
	args func(conn, good, dir string) []string
}{
	{"run --source", func(conn, good, dir string) []string {
		return []string{"run", "--source", conn, "--target", good, "--slot", "awk", "--publication", "awk", "--spill-dir", dir, "--log-level", "trace"}
	}},
	{"run --target", func(conn, good, dir string) []string {
		return []string{"run", "--source", good, "--target", conn, "--slot", "awk", "--publication", "awk", "--spill-dir", dir, "--log-level", "trace"}
	}},
	{"status --target", func(conn, good, dir string) []string { return []string{"status", "--target", conn} }},
	{"status --source", func(conn, good, dir string) []string { return []string{"status", "--target", good, "--source", conn} }},
	{"decode --source", func(conn, good, dir string) []string {
		return []string{"decode", "--source", conn, "--slot", "awk", "--publication", "awk"}
	}},
	{"sequences --source", func(conn, good, dir string) []string {
		return []string{"sequences", "--source", conn, "--target", good}
	}},
	{"sequences --target", func(conn, good, dir string) []string {
		return []string{"sequences", "--source", good, "--target", conn}
	}},
	// drop connects to --source only for an applier the target knows
	// (its slot); that connection is protocol.ConnectReplication's, whose
	// errors the library cases below check.
	{"drop --target", func(conn, good, dir string) []string {
		return []string{"drop", "--target", conn, "--name", "awk", "--spill-dir", dir}
	}},
}

// TestAwkwardPasswordsNeverPrinted runs every walapply command, once per
// connection string flag, with awkward passwords in the forms users write
// them (URL encoded or raw, as a query parameter, key/value quoted or raw)
// on each error path: a string that does not parse, a wrong password
// against the server, a refused connection. Neither the binary's stdout
// and stderr nor the library's errors and log lines may show a piece of
// the password (four bytes or more, as written or percent-encoded), and
// each error still names what went wrong and where.
func TestAwkwardPasswordsNeverPrinted(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		c := awkwardCluster(t, version)
		good := c.ConnString("postgres")
		dead := deadPort(t)
		bin := walapplyBinary(t)
		spill := t.TempDir()
		t.Run("binary", func(t *testing.T) {
			for ri, cmd := range passwordCommands {
				cases := awkwardCases(t, c, dead, ri)
				sem := make(chan struct{}, 3)
				var wg sync.WaitGroup
				for _, ac := range cases {
					wg.Go(func() {
						sem <- struct{}{}
						defer func() { <-sem }()
						out := &testutil.LogBuffer{}
						p := secStart(t, bin, os.Environ(), out, cmd.args(ac.conn, good, spill)...)
						// run retries a refused connection: its first
						// report is enough.
						deadline := time.Now().Add(time.Minute)
						running := func() bool { exited, _ := p.Exited(); return !exited }
						for running() && !strings.Contains(out.String(), "transient error") && time.Now().Before(deadline) {
							time.Sleep(5 * time.Millisecond)
						}
						p.Kill()
						checkAwkward(t, cmd.name, ac, out.String())
					})
				}
				wg.Wait()
			}
		})
		t.Run("library", func(t *testing.T) {
			for _, ac := range awkwardCases(t, c, dead, -1) {
				for _, side := range []string{"source", "target"} {
					log := &testutil.LogBuffer{}
					cfg := apply.Config{Source: good, Target: good, Slot: "awk", Publications: []string{"awk"},
						SpillDir: spill, Logger: zerolog.New(log).Level(zerolog.TraceLevel)}
					if side == "source" {
						cfg.Source = ac.conn
					} else {
						cfg.Target = ac.conn
					}
					err := runUntilReport(cfg, log)
					checkAwkward(t, "apply.Run, "+side, ac, fmt.Sprint(err)+"\n"+log.String())
					o := apply.SequenceOptions{Source: cfg.Source, Target: cfg.Target}
					_, err = apply.SyncSequences(context.Background(), o)
					checkAwkward(t, "apply.SyncSequences, "+side, ac, fmt.Sprint(err))
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				checkAwkward(t, "apply.WaitCaughtUp", ac, fmt.Sprint(apply.WaitCaughtUp(ctx, ac.conn, "awk")))
				checkAwkward(t, "migrations.Up", ac, fmt.Sprint(migrations.Up(ctx, ac.conn)))
				_, err := protocol.ConnectReplication(ctx, ac.conn)
				checkAwkward(t, "protocol.ConnectReplication", ac, fmt.Sprint(err))
				cancel()
			}
		})
	})
}

// runUntilReport runs the applier until it stops with an error, or has
// logged its first transient one (it would retry that forever).
func runUntilReport(cfg apply.Config, log *testutil.LogBuffer) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- apply.Run(ctx, cfg) }()
	for {
		select {
		case err := <-done:
			return err
		case <-time.After(5 * time.Millisecond):
			if strings.Contains(log.String(), "transient error") {
				cancel()
				return <-done
			}
		}
	}
}
