package apply_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/testenv"
)

// runRefused runs apply.Run with cfg, expecting a permanent error at once
// (not retried), and returns it.
func (h *harness) runRefused(cfg apply.Config) error {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.ctx, 20*time.Second)
	defer cancel()
	start := time.Now()
	err := apply.Run(ctx, cfg)
	if err == nil || ctx.Err() != nil {
		h.t.Fatalf("run was not refused: it ran (or retried) for %s: %v", time.Since(start).Round(time.Millisecond), err)
	}
	if apply.IsTransient(err) {
		h.t.Errorf("the refusal is transient: %v", err)
	}
	h.t.Logf("refused after %s: %v", time.Since(start).Round(time.Millisecond), err)
	return err
}

// A second run with the name of a running applier stops at once with the
// first one's pid and host; a stale walapply.running row (kill -9) does
// not stop a start; a lock held without a row says "pid unknown"; two names
// that share a lock key say so.
func TestSecondRunRefused(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, nil)
		h.both("CREATE TABLE t (id int PRIMARY KEY)")
		h.source("CREATE PUBLICATION p FOR TABLE t")
		cfg := h.config("app_slot", "p")
		cfg.Name = "app"
		stop := h.runApplier(cfg)
		h.source("INSERT INTO t VALUES (1)")
		h.waitCaughtUp("app_slot", 30*time.Second)

		host, _ := os.Hostname()
		err := h.runRefused(cfg)
		want := fmt.Sprintf(`applier "app" is already running against this target (pid %d on host %s, since `, os.Getpid(), host)
		if !strings.Contains(err.Error(), want) || !strings.HasSuffix(err.Error(), "; stop it first") {
			t.Errorf("second run: %v\nwant it to contain %q", err, want)
		}
		// The first one runs on, and is the one recorded.
		h.source("INSERT INTO t VALUES (2)")
		h.waitCaughtUp("app_slot", 30*time.Second)
		h.expect("SELECT pid::text || ' ' || host FROM walapply.running WHERE applier = 'app'", strconv.Itoa(os.Getpid())+" "+host)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		h.expect("SELECT applier FROM walapply.running") // a clean stop removes the row

		// kill -9 leaves a row whose backend no longer holds the lock.
		h.target("INSERT INTO walapply.running (applier, pid, host, backend_pid) VALUES ('app', 999999, 'gone', 1)")
		stop = h.runApplier(cfg)
		h.source("INSERT INTO t VALUES (3)")
		h.waitCaughtUp("app_slot", 30*time.Second)
		h.expect("SELECT pid::text || ' ' || host FROM walapply.running WHERE applier = 'app'", strconv.Itoa(os.Getpid())+" "+host)
		if err := stop(); err != nil {
			t.Fatal(err)
		}

		// The lock held by a session that recorded no row (a drop, an older
		// walapply): the holder's pid is unknown, its backend is named.
		conn, err := h.pair.Target.Connect(h.ctx, "postgres")
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(h.ctx)
		var backend int
		if err := conn.QueryRow(h.ctx, "SELECT pg_backend_pid() FROM (SELECT pg_advisory_lock(x'77616c61'::int, hashtext('app'))) l").Scan(&backend); err != nil {
			t.Fatal(err)
		}
		err = h.runRefused(cfg)
		if want := fmt.Sprintf(`applier "app" is already running against this target (pid unknown: target backend %d holds its lock`, backend); !strings.Contains(err.Error(), want) {
			t.Errorf("run while another session holds the lock: %v\nwant %q", err, want)
		}
		if _, err := conn.Exec(h.ctx, "SELECT pg_advisory_unlock_all()"); err != nil {
			t.Fatal(err)
		}

		// kill -9 and a restart before the target ended the killed
		// process's backend: the lock is still held, for a pid of this host
		// that is gone. The start waits for it rather than stop.
		dead := exec.Command("true")
		if err := dead.Run(); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(h.ctx, "SELECT pg_advisory_lock(x'77616c61'::int, hashtext('app'))"); err != nil {
			t.Fatal(err)
		}
		h.target(fmt.Sprintf("INSERT INTO walapply.running (applier, pid, host, backend_pid) VALUES ('app', %d, '%s', %d)", dead.Process.Pid, host, backend))
		stop = h.runApplier(cfg)
		time.Sleep(time.Second)
		if err := h.applierStopped(); err != nil {
			t.Fatalf("start while a killed process's backend holds the lock: %v", err)
		}
		if _, err := conn.Exec(h.ctx, "SELECT pg_advisory_unlock_all()"); err != nil {
			t.Fatal(err)
		}
		h.source("INSERT INTO t VALUES (5)")
		h.waitCaughtUp("app_slot", 30*time.Second)
		if err := stop(); err != nil {
			t.Fatal(err)
		}

		// Two names with the same hashtext share the lock.
		var a, b string
		err = conn.QueryRow(h.ctx, `SELECT min(n), max(n) FROM (SELECT 'c' || i AS n, hashtext('c' || i) AS k FROM generate_series(1, 300000) i) s
			GROUP BY k HAVING count(*) > 1 LIMIT 1`).Scan(&a, &b)
		if err != nil {
			t.Fatal(err)
		}
		ca := h.config("coll_slot", "p")
		ca.Name = a
		stop = h.runApplier(ca)
		h.source("INSERT INTO t VALUES (4)")
		h.waitCaughtUp("coll_slot", 30*time.Second)
		cb := h.config("other_slot", "p")
		cb.Name = b
		err = h.runRefused(cb)
		if want := fmt.Sprintf(`applier %q cannot run: applier %q (pid %d on host %s, since `, b, a, os.Getpid(), host); !strings.Contains(err.Error(), want) {
			t.Errorf("run of a name that shares the lock key: %v\nwant %q", err, want)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	})
}

// The same with walapply processes: a second `walapply run` exits at once
// naming the first process; after a kill -9 of the first, a new process
// starts (it waits for the killed one's target sessions to end, if need
// be) instead of being refused.
func TestSecondRunRefusedProcess(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, nil)
		h.both("CREATE TABLE t (id int PRIMARY KEY)")
		h.source("CREATE PUBLICATION p FOR TABLE t")
		h.createSlot("app_slot")
		p := h.applierProcess("app_slot", "p")
		p.start()
		h.source("INSERT INTO t VALUES (1)")
		h.waitCaughtUp("app_slot", 30*time.Second)

		ctx, cancel := context.WithTimeout(h.ctx, 20*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, p.args[0], p.args[1:]...).CombinedOutput()
		host, _ := os.Hostname()
		// The log is JSON: the error is its last record (the fatal one).
		want := fmt.Sprintf(`"error":"applier \"app_slot\" is already running against this target (pid %d on host %s, since `, p.proc.Pid(), host)
		var exit *exec.ExitError
		if ctx.Err() != nil || !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), want) {
			t.Fatalf("second walapply run: %v (%v)\n%s\nwant exit 1 and %q", err, ctx.Err(), out, want)
		}
		t.Logf("second walapply run: %s", strings.TrimSpace(string(out)))

		p.kill()
		p.start()
		h.source("INSERT INTO t VALUES (2)")
		h.waitCaughtUp("app_slot", 30*time.Second)
		p.stop()
		h.expect("SELECT id::text FROM t", "1", "2")
	})
}
