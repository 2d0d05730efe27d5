package apply_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/walapply/walapply/testenv"
)

// startupLogSettings make both servers log every statement (with the
// steps of the extended protocol) and every replication command, each line
// naming the application.
var startupLogSettings = map[string]string{
	"log_min_duration_statement": "0",
	"log_replication_commands":   "on",
	"log_line_prefix":            "%m [%p] app=%a: ",
	"log_connections":            "on",
}

// startupConnection matches the log line of a connection walapply opened
// (with its application_name), replication or plain.
var startupConnection = regexp.MustCompile(`connection authorized: .*application_name=walapply `)

// startupStatement matches a log line of a round trip: a statement, a
// replication command, or the parse of a named (prepared) statement, which
// pgx sends on its own (an unnamed one goes with its execute), sent by any
// connection (app=[unknown]: one without an application_name) or by
// walapply's.
var startupStatement = regexp.MustCompile(`app=(walapply [^:]*|\[unknown\]): (LOG|ERROR):  (duration: [0-9.]+ ms  (parse [^<]|execute|statement)|statement:|received replication command:)`)

// startupCount counts the lines of c's server log written after offset
// that startupStatement matches; walapply's alone if only is set (the
// harness itself queries the source while walapply starts, never the
// target).
func startupCount(t *testing.T, c *testenv.Cluster, offset int, only bool) (int, string) {
	t.Helper()
	return startupMatches(t, c, offset, func(line string) bool {
		return startupStatement.MatchString(line) && (!only || strings.Contains(line, "app=walapply "))
	})
}

// startupMatches counts the lines of c's server log written after offset
// for which match holds, and returns them.
func startupMatches(t *testing.T, c *testenv.Cluster, offset int, match func(string) bool) (int, string) {
	t.Helper()
	b, err := os.ReadFile(c.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var lines []string
	for _, line := range strings.Split(string(b[offset:]), "\n") {
		if match(line) {
			n++
			lines = append(lines, line)
		}
	}
	return n, strings.Join(lines, "\n")
}

func logSize(t *testing.T, c *testenv.Cluster) int {
	t.Helper()
	fi, err := os.Stat(c.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	return int(fi.Size())
}

// TestStartupStatements counts what a start sends to either server until
// it replicates: a first one on a fresh target, which migrates the walapply
// schema and creates the slot, and a restart on the target it set up,
// which must stay within a fixed number of steps (the migration there is
// one query, not one per migration file) and of source connections (the
// replication connection, and the plain one the start's checks share:
// connect_plain.go). STARTUP_SHOW=1 logs what each start sent.
func TestStartupStatements(t *testing.T) {
	const maxTarget, maxSource = 48, 16 // the restart's: 44 and 15 when written
	const maxSourceConns = 2
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, startupLogSettings, startupLogSettings)
		h.both("CREATE TABLE t (id int PRIMARY KEY)")
		h.source("CREATE PUBLICATION p FOR TABLE t")
		cfg := h.config("st_slot", "p")
		replicating := make(chan time.Time, 2)
		cfg.Logger = cfg.Logger.Hook(zerolog.HookFunc(func(_ *zerolog.Event, _ zerolog.Level, msg string) {
			if msg == "replicating" {
				replicating <- time.Now()
			}
		}))
		for run := 1; run <= 2; run++ {
			src, tgt := logSize(t, h.pair.Source), logSize(t, h.pair.Target)
			began := time.Now()
			stop := h.runApplier(cfg)
			if err := h.pair.Source.WaitSlotActive(h.ctx, "st_slot", true, 30*time.Second); err != nil {
				t.Fatal(err)
			}
			took := (<-replicating).Sub(began)
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			if err := h.pair.Source.WaitSlotActive(h.ctx, "st_slot", false, 30*time.Second); err != nil {
				t.Fatal(err)
			}
			ns, srcLines := startupCount(t, h.pair.Source, src, true)
			nt, tgtLines := startupCount(t, h.pair.Target, tgt, false)
			nc, connLines := startupMatches(t, h.pair.Source, src, startupConnection.MatchString)
			t.Logf("start %d: %d steps on the target, %d on the source, %d source connections, replicating after %v", run, nt, ns, nc, took.Round(time.Millisecond))
			if nc > maxSourceConns {
				t.Errorf("start %d opened %d connections to the source (at most %d):\n%s", run, nc, maxSourceConns, connLines)
			}
			if os.Getenv("STARTUP_SHOW") != "" {
				t.Logf("target:\n%s\nsource:\n%s", tgtLines, srcLines)
			}
			if run == 2 && (nt > maxTarget || ns > maxSource) {
				t.Errorf("a restart on a set-up target sent %d steps to the target (at most %d) and %d to the source (at most %d):\ntarget:\n%s\nsource:\n%s",
					nt, maxTarget, ns, maxSource, tgtLines, srcLines)
			}
		}
	})
}
